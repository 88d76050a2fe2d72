package console

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// browserResolve resolves a Location header against base the way a browser
// does (the WHATWG URL standard), which is laxer than net/url: it trims C0
// controls and spaces at both ends, removes every tab, CR and LF, and, in an
// http(s) URL, reads '\' as '/' before the query; a '%' that starts no
// escape is kept as it is (net/url refuses it: it is encoded here).
func browserResolve(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(loc)
	before, after, q := strings.Cut(loc, "?")
	loc = strings.ReplaceAll(before, `\`, "/")
	if q {
		loc += "?" + after
	}
	return base.Parse(escapeLonePercents(loc))
}

// escapeLonePercents encodes each '%' that two hex digits do not follow.
func escapeLonePercents(s string) string {
	hex := func(i int) bool { return i < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i]) >= 0 }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '%' && !(hex(i+1) && hex(i+2)) {
			b.WriteString("25")
		}
	}
	return b.String()
}

// After a sign-in the console sends the browser to the page it came from,
// and never off the console: a next that a browser could read as another
// host (a tab or a line break the browser removes, a backslash it reads as
// a slash, two slashes, a scheme) goes to the start page.
func TestLogin_NextStaysOnTheConsole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Token: testToken, ProtectReads: true})
	base, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	nextField := regexp.MustCompile(`name="next" value="([^"]*)"`)
	for _, tc := range []struct{ next, want string }{
		{"/flows?sort=backlog", "/flows?sort=backlog"},
		{"/flow?name=acme%2Forders", "/flow?name=acme%2Forders"},
		{"/event?id=a%20b%23c", "/event?id=a%20b%23c"},
		{"/", "/"},
		{"/%09/evil.example/", "/%09/evil.example/"}, // an encoded tab stays in the path
		{"/\t/evil.example/", "/"},
		{"/\n/evil.example/", "/"},
		{"/\r/evil.example/", "/"},
		{"\t//evil.example/", "/"},
		{"/\t\t/evil.example/", "/"},
		{"//evil.example/", "/"},
		{"///evil.example/", "/"},
		{`/\evil.example/`, "/"},
		{`\/evil.example/`, "/"},
		{`\\evil.example/`, "/"},
		{"/flows\\..\\..\\/evil.example", "/"},
		{"https://evil.example/", "/"},
		{"http:evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{" /flows", "/"},
		{"/flows ", "/"},
		{"/\x00/evil.example", "/"},
		{"/ü", "/"},
		{"", "/"},
		{"/" + strings.Repeat("a", 4096), "/"},
	} {
		c := f.client(t)
		// The sign-in form carries next.
		code, body := f.get(t, c, pageLink("/login", "next", tc.next))
		m := nextField.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil || html.UnescapeString(m[1]) != tc.want {
			t.Errorf("GET /login?next=%q = %d with next field %v, want %q", tc.next, code, m, tc.want)
		}
		csrf := f.csrf(t, c)
		resp := f.roundTrip(t, c, "/login", url.Values{"token": {testToken}, "csrf": {csrf}, "next": {tc.next}})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || loc != tc.want {
			t.Errorf("POST /login next=%q = %d Location %q, want 303 %q", tc.next, resp.StatusCode, loc, tc.want)
		}
		u, err := browserResolve(base, loc)
		if err != nil || u.Scheme != base.Scheme || u.Host != base.Host {
			t.Errorf("POST /login next=%q: a browser goes to %v (%v), off the console %s", tc.next, u, err, base.Host)
		}
	}
}

// roundTrip posts form to path with c's cookies and returns the answer as
// it came, without reading its Location as net/http's client does (it
// refuses a Location with a control character, which a browser follows).
func (f *fixture) roundTrip(t testing.TB, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range c.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST %s error = %v", path, err)
	}
	resp.Body.Close()
	return resp
}

// A page asked for before signing in is the one shown after it, however
// odd its query.
func TestLogin_ReturnsToThePageAskedFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Token: testToken, ProtectReads: true})
	c := f.client(t)
	want := pageLink("/flow", "name", "acme/orders: a#b ü")
	resp, err := c.Get(f.srv.URL + want)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(login, "/login?") {
		t.Fatalf("GET %s unsigned = %d %q, want 303 to the sign-in", want, resp.StatusCode, login)
	}
	_, body := f.get(t, c, login)
	m := regexp.MustCompile(`name="next" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the sign-in page has no next field:\n%s", body)
	}
	csrf := f.csrf(t, c)
	resp, _ = f.post(t, c, "/login", url.Values{"token": {testToken}, "csrf": {csrf}, "next": {html.UnescapeString(m[1])}}, nil)
	if got := resp.Header.Get("Location"); got != want {
		t.Errorf("after the sign-in Location = %q, want the page asked for, %q", got, want)
	}
}

// Whatever next a sign-in is given, the address it returns to stays on the
// console when a browser reads it.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/flows", "/\t/evil.example/", `/\evil`, "//x", "/%2F%2Fx", "/a?b=\\c", "\x00/", "/0%", "/%%41", "/%4", "/%%"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://127.0.0.1:8080/login")
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		u, err := browserResolve(base, got)
		if err != nil || u.Scheme != "http" || u.Host != base.Host || u.User != nil {
			t.Errorf("safeNext(%q) = %q: a browser goes to %v (%v)", next, got, u, err)
		}
		if got != "/" && got != next {
			t.Errorf("safeNext(%q) = %q: a kept address must be kept as it was", next, got)
		}
	})
}

// getHost asks for path with the Host header host and returns the status
// and the body.
func (f *fixture) getHost(t testing.TB, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s) error = %v", path, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A page on another site whose name is pointed at this machine (DNS
// rebinding) reaches the console with its own name in Host: the console
// answers loopback names and the names it is given only, and 421 to the
// others, before reading anything.
func TestHost_OnlyLoopbackAndAllowedNames(t *testing.T) {
	t.Parallel()
	seeded := newFixture(t, Options{})
	_, port, _ := strings.Cut(strings.TrimPrefix(seeded.srv.URL, "http://"), ":")
	for _, tc := range []struct {
		allowed []string
		host    string
		want    int
	}{
		{nil, "127.0.0.1:" + port, http.StatusOK},
		{nil, "localhost:" + port, http.StatusOK},
		{nil, "LocalHost.:" + port, http.StatusOK},
		{nil, "console.localhost:" + port, http.StatusOK},
		{nil, "[::1]:" + port, http.StatusOK},
		{nil, "127.8.9.10", http.StatusOK},
		{nil, "evil.example:" + port, http.StatusMisdirectedRequest},
		{nil, "evil.example", http.StatusMisdirectedRequest},
		{nil, "localhost.evil.example:" + port, http.StatusMisdirectedRequest},
		{nil, "127.0.0.1.evil.example", http.StatusMisdirectedRequest},
		{nil, "192.168.1.4:" + port, http.StatusMisdirectedRequest},
		{nil, "[::ffff:7f00:1]:" + port, http.StatusOK},
		{[]string{"relay-console.example.com"}, "relay-console.example.com", http.StatusOK},
		{[]string{"relay-console.example.com"}, "Relay-Console.example.com:443", http.StatusOK},
		{[]string{"relay-console.example.com"}, "other.example.com", http.StatusMisdirectedRequest},
		{[]string{"relay-console.example.com"}, "localhost:" + port, http.StatusOK},
		{[]string{"relay.example.com:8443"}, "relay.example.com:8443", http.StatusOK},
		{[]string{"relay.example.com:8443"}, "relay.example.com:443", http.StatusMisdirectedRequest},
		{[]string{"relay.example.com:8443"}, "relay.example.com", http.StatusMisdirectedRequest},
		{[]string{"192.168.1.4"}, "192.168.1.4:" + port, http.StatusOK},
		{[]string{"[fd00::4]"}, "[fd00::4]:" + port, http.StatusOK},
		{[]string{"*"}, "evil.example", http.StatusOK},
	} {
		f := serve(t, seeded.q, seeded.r, Options{AllowedHosts: tc.allowed})
		for _, p := range []string{"/", "/quarantined", "/static/style.css", "/nothing"} {
			want := tc.want
			if want == http.StatusOK && p == "/nothing" {
				want = http.StatusNotFound
			}
			code, body := f.getHost(t, tc.host, p)
			if code != want {
				t.Errorf("AllowedHosts %q: GET %s with Host %q = %d, want %d", tc.allowed, p, tc.host, code, want)
			}
			if code == http.StatusMisdirectedRequest && (strings.Contains(body, "acme") || strings.Contains(body, "quarantined")) {
				t.Errorf("AllowedHosts %q: GET %s with Host %q shows the queue:\n%s", tc.allowed, p, tc.host, body)
			}
		}
	}
	// An HTTP/1.0 request may leave Host out: that is no loopback name.
	if (hostRules{}).allow("") {
		t.Errorf("an empty Host is allowed")
	}
	// A write from a refused host changes nothing either.
	f := serve(t, seeded.q, seeded.r, Options{Token: testToken})
	before, err := f.q.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/redrive-all", strings.NewReader(url.Values{"reason": {"x"}, "token": {testToken}}.Encode()))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("POST /redrive-all with Host evil.example = %v, %v; want 421", resp, err)
	}
	after, err := f.q.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("a write from a refused host changed the queue")
	}
}

func TestNew_RefusesBadAllowedHosts(t *testing.T) {
	t.Parallel()
	q, r := openStores(t)
	for _, h := range []string{"", " ", "a b", "http://x.example", "x.example/", "x:y:z", "x.example:0x", "[::1", "*.example.com"} {
		if _, err := New(q, r, Options{AllowedHosts: []string{h}}); !errors.Is(err, ErrOptions) {
			t.Errorf("New(AllowedHosts %q) error = %v, want ErrOptions", h, err)
		}
	}
}
