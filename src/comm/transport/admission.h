// Admission under a connection flood (issue 41, item 8): which unproven connection a full listener
// drops to make room for a new one. Both listeners that accept before authenticating — the TCP
// store's server and the mesh's handshake loop — cap the connections still proving themselves.
// Dropping the oldest overall lets a flood of 1,000 connections a second push out a legitimate
// client that is a little slow to answer (a loaded machine: the workers are training). Instead the
// victim is the oldest connection of the source address that holds the most unproven ones: a
// flooding host evicts its own connections first, and a client from any other address keeps its
// place as long as it holds fewer than the flooder. (One source address flooding and working
// legitimately at once cannot be told apart here; the job secret still keeps it out.)
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace cdt::net {

// "10.0.0.2:41234" -> "10.0.0.2"; "[::1]:5" -> "[::1]"; anything without a port as it is.
inline std::string_view SourceHost(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || (address.front() == '[' && address.find(']') > colon))
    return address;
  return address.substr(0, colon);
}

// Among [begin, end) in arrival order, the oldest unproven connection of the source holding the
// most unproven ones, or `end` if none is unproven. `address(c)` gives a connection's peer
// address ("host:port"), `unproven(c)` whether it still has to prove itself.
template <typename It, typename Address, typename Unproven>
It ChooseEviction(It begin, It end, Address address, Unproven unproven) {
  std::map<std::string_view, int> per_source;
  std::string_view worst;
  int most = 0;
  for (It it = begin; it != end; ++it) {
    if (!unproven(*it)) continue;
    const std::string_view source = SourceHost(address(*it));
    const int n = ++per_source[source];
    if (n > most) most = n, worst = source;
  }
  if (most == 0) return end;
  for (It it = begin; it != end; ++it)
    if (unproven(*it) && SourceHost(address(*it)) == worst) return it;
  return end;
}

}  // namespace cdt::net
