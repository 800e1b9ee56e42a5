// Declaration shim for ProcessGroupGloo.hpp (see ../README.md).
#pragma once
