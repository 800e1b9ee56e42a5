// A one-connection-at-a-time HTTP server on 127.0.0.1 for the MLflow client's tests: each request
// (its method, path, headers and body, read whole) goes to the test's handler, which writes the
// answer itself through a Reply: at once, dripped a few bytes at a time, or without end. Hostile
// servers in a few lines; the test's thread is never the one that answers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tp::test {

struct FakeRequest {
  std::string method, path, headers, body;
};

/// Writes an answer to the connection; every call returns false once the client has gone (or the
/// server is stopping), which ends a handler's endless loop.
class Reply {
 public:
  Reply(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      if (stopping_) return false;
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  /// A whole answer: status line, Content-Length and `body`.
  bool answer(int status, std::string_view body) {
    return send("HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\nConnection: close\r\n\r\n") &&
           send(body);
  }
  /// Waits `seconds` unless the server is stopping; false then.
  bool pause(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (stopping_) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
};

class FakeHttpServer {
 public:
  using Handler = std::function<void(const FakeRequest&, Reply&)>;
  explicit FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0)
      std::abort();
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeHttpServer() {
    stopping_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stopping_) {
      pollfd ready{listen_fd_, POLLIN, 0};
      if (::poll(&ready, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      FakeRequest request;
      if (read_request(fd, request)) {
        {
          std::lock_guard lock(mutex_);
          requests_.push_back(request);
        }
        Reply reply(fd, stopping_);
        handler_(request, reply);
      }
      ::close(fd);
    }
  }

  bool read_request(int fd, FakeRequest& request) {
    std::string data;
    char buffer[65536];
    size_t header_end = std::string::npos;
    size_t length = 0;
    while (!stopping_) {
      if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
        request.headers = data.substr(0, header_end);
        const size_t space = request.headers.find(' ');
        const size_t second = request.headers.find(' ', space + 1);
        request.method = request.headers.substr(0, space);
        request.path = request.headers.substr(space + 1, second - space - 1);
        for (const char* name : {"\r\nContent-Length: ", "\r\ncontent-length: "})
          if (const size_t at = request.headers.find(name); at != std::string::npos)
            length = std::strtoull(request.headers.c_str() + at + std::string_view(name).size(), nullptr, 10);
        if (request.headers.find("Expect: 100-continue") != std::string::npos)
          (void)::send(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL);
      }
      if (header_end != std::string::npos && data.size() >= header_end + 4 + length) {
        request.body = data.substr(header_end + 4, length);
        return true;
      }
      pollfd ready{fd, POLLIN, 0};
      if (::poll(&ready, 1, 20) <= 0) continue;
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<size_t>(n));
    }
    return false;
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<FakeRequest> requests_;
};

}  // namespace tp::test
