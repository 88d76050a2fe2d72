package console

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// hostRules is Options.AllowedHosts, parsed: the console answers the
// loopback names and these.
type hostRules struct {
	any   bool       // "*": every name
	rules []hostRule // the names
}

// hostRule is one allowed name: a host in normal form (see normalHost) and
// a port, "" for any.
type hostRule struct{ host, port string }

// parseHostRules checks and parses Options.AllowedHosts.
func parseHostRules(list []string) (hostRules, error) {
	var hs hostRules
	for _, s := range list {
		if s == "*" {
			hs.any = true
			continue
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			host, port = s, ""
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return hostRules{}, fmt.Errorf("%w: allowed host %q: the port must be a number 1..65535", ErrOptions, s)
		}
		host = normalHost(host)
		if !validHost(host) {
			return hostRules{}, fmt.Errorf("%w: allowed host %q: want a host name or IP address, optionally with :port, or *", ErrOptions, s)
		}
		hs.rules = append(hs.rules, hostRule{host, port})
	}
	return hs, nil
}

// allow reports whether the console answers a request whose Host header is
// hostport: a loopback name, an allowed one, or any with "*".
func (hs hostRules) allow(hostport string) bool {
	if hs.any {
		return true
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	host = normalHost(host)
	if loopbackHost(host) {
		return true
	}
	for _, r := range hs.rules {
		if r.host == host && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

// normalHost is a host as the console compares it: lower case, without
// the brackets of an IPv6 address or the final dot of a fully qualified
// name.
func normalHost(h string) string {
	h = strings.ToLower(h)
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(h, ".")
}

// validHost reports whether h (in normal form) is an IP address or a DNS
// name: labels of letters, digits, '-' and '_', joined by dots.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// loopbackHost reports whether h (in normal form) names this machine's
// loopback interface and nothing else: localhost, a name under .localhost
// (which browsers resolve to loopback themselves, RFC 6761), or a loopback
// IP address. A DNS-rebinding page cannot send such a Host: its own name
// is in it.
func loopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
