#include "dist/store_connection.h"

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "tp/framework/error.h"

namespace tp {

c10::intrusive_ptr<c10d::Store> connect_store(const std::string& host, const c10d::TCPStoreOptions& options) {
  if (options.isServer) return c10::make_intrusive<c10d::TCPStore>(host, options);
  // The task owns everything the thread reads: the thread may outlive this call, blocked in c10d.
  auto task = std::make_shared<std::packaged_task<c10::intrusive_ptr<c10d::Store>()>>(
      [host, options] { return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(host, options)); });
  std::future<c10::intrusive_ptr<c10d::Store>> store = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (store.wait_for(options.timeout) != std::future_status::ready)
    throw Error("no answer from it within that time (nothing accepted the connection, or something that is not "
                "rank 0's store, such as another program, listens on that port and never answers)");
  return store.get(); // c10d's own error, when it gave up first
}

}  // namespace tp
