#include "support/ring_growth.hpp"

#include <stdexcept>
#include <vector>

#include "support/http_client.hpp"

namespace sm::test {

namespace {

void answered(Connection& c, const std::string& target) {
    const Response r = c.read_response();
    if (r.status != 200) throw std::runtime_error("GET " + target + " got: " + r.raw);
}

}  // namespace

RingGrowth grow_ring(const ServerProcess& server, const std::string& target) {
    const std::string request = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    RingGrowth g;
    {
        Connection c(server.host(), server.port());
        c.send(request);
        answered(c, target);
    }
    g.at_rest_kib = g.loaded_kib = rss_kib(server.pid());
    for (int round = 0; round < 5 && g.loaded_kib < g.at_rest_kib + kFirstRingBuffers * kRingBufferKiB;
         ++round) {
        std::vector<Connection> conns;
        for (int i = 0; i < 256; ++i)
            conns.emplace_back(server.host(), server.port());
        for (auto& c : conns)
            c.send(request);
        for (auto& c : conns)
            answered(c, target);
        g.loaded_kib = rss_kib(server.pid());
    }
    return g;
}

}  // namespace sm::test
