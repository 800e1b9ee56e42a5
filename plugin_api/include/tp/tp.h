/* torchhost plugin ABI: umbrella include of the stable (Tier S) headers.
 * Tier T plugins additionally include tp/iface/model.h, loss.h, metric.h or batch_transform.h. */
#ifndef TP_TP_H
#define TP_TP_H

#include "tp/config.h"
#include "tp/entry.h"
#include "tp/host.h"
#include "tp/macros.h"
#include "tp/status.h"
#include "tp/version.h"
#include "tp/iface/callback.h"
#include "tp/iface/dataset.h"

#endif /* TP_TP_H */
