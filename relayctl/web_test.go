package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

const webToken = "relayctl-web-test-token-0123"

// webStores makes a queue.db with one quarantined event (e1 in flow f1,
// failed three times) and an empty receiver.db in a new folder.
func webStores(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	quarantineOne(t, q)
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return dir
}

// webStoresPG makes the same stores in two new PostgreSQL schemas and
// returns the --queue and --receiver flags that name them.
func webStoresPG(t *testing.T) []string {
	t.Helper()
	q, queueURL := pgQueueSchema(t)
	defer q.Close()
	quarantineOne(t, q)
	base, schema := pgtest.Schema(t)
	r, err := pgreceiverstore.OpenPool(context.Background(), pgtest.Pool(t), pgreceiverstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return []string{"--queue", queueURL, "--receiver", pgURL(t, base, schema)}
}

// quarantineOne enqueues e1 in flow f1 and fails it three times.
func quarantineOne(t *testing.T, q queue.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f1", Body: []byte(`{"delta": 1}`)}, 0); err != nil {
		t.Fatal(err)
	}
	for _, now := range []clock.Tick{1, 3, 7} {
		c, ok, err := q.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", now, ok, err)
		}
		if _, err := q.Settle(ctx, c.EventID, c.Generation, queue.Result{Reason: "unavailable"}, now); err != nil {
			t.Fatal(err)
		}
	}
}

// startWeb runs "relayctl web args..." in dir until the test ends and
// returns the address it serves, read from its first line.
func startWeb(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return startWebWith(t, dir, nil, args...)
}

// startWebWith is startWeb with global flags (--queue, --receiver) before
// the command.
func startWebWith(t *testing.T, dir string, global []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	e := newEnv(strings.NewReader(""), pw, io.Discard)
	e.ctx, e.dir = ctx, dir
	code := make(chan int, 1)
	go func() {
		code <- e.main(append(append(global, "web"), args...))
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("relayctl web printed no address: %v", err)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != exitOK {
				t.Errorf("relayctl web exit status %d after Ctrl-C, want 0", c)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("relayctl web did not stop")
		}
	})
	addr, _, ok := strings.Cut(strings.TrimPrefix(line, "relayctl web: serving http://"), " ")
	if !ok {
		t.Fatalf("relayctl web first line = %q", line)
	}
	return addr
}

func TestWeb_ServesAndRedrivesWithTheEnvironmentToken(t *testing.T) {
	t.Setenv(tokenEnv, webToken)
	t.Run("sqlite", func(t *testing.T) {
		webServesAndRedrives(t, startWeb(t, webStores(t), "--listen", "127.0.0.1:0"))
	})
	// The console on PostgreSQL stores: its paged reads are the store's
	// (queue.Pager), the receiver page reads pgreceiverstore.
	t.Run("postgres", func(t *testing.T) {
		pgtest.Require(t)
		flags := webStoresPG(t)
		addr := startWebWith(t, t.TempDir(), flags, "--listen", "127.0.0.1:0")
		webServesAndRedrives(t, addr)
	})
}

func webServesAndRedrives(t *testing.T, addr string) {
	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/quarantined")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "e1") || !strings.Contains(string(body), "unavailable") {
		t.Fatalf("GET /quarantined = %d:\n%s", resp.StatusCode, body)
	}
	u, _ := url.Parse(base)
	var csrf string
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "fairrelay_csrf" {
			csrf = ck.Value
		}
	}
	form := url.Values{"id": {"e1"}, "generation": {"3"}, "reason": {"receiver back"}, "csrf": {csrf}}
	resp, err = c.PostForm(base+"/redrive", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /redrive without the token = %d, want 403", resp.StatusCode)
	}
	form.Set("token", webToken)
	resp, err = c.PostForm(base+"/redrive", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /redrive with the token = %d, want 303", resp.StatusCode)
	}
	resp, err = c.Get(base + resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "receiver back") || !strings.Contains(string(body), "pending") {
		t.Errorf("event page after the redrive:\n%s", body)
	}
}

func TestWeb_BeyondLoopbackEveryPageNeedsTheToken(t *testing.T) {
	t.Parallel()
	dir := webStores(t)
	addr := startWeb(t, dir, "--listen", "0.0.0.0:0", "--token", webToken, "--receiver", "")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	resp, err = c.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("GET / beyond loopback = %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/receiver", nil)
	req.Header.Set("Authorization", "Bearer "+webToken)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "without a receiver") {
		t.Errorf("GET /receiver with the token = %d:\n%s", resp.StatusCode, body)
	}
	// Beyond loopback the console answers any name by default (every page
	// needs the token there), as a machine is reached by names of its own.
	if code, _ := getWithHost(t, "http://127.0.0.1:"+port, "relay-box.lan:"+port, "/receiver", http.Header{"Authorization": {"Bearer " + webToken}}); code != 200 {
		t.Errorf("GET /receiver beyond loopback with Host relay-box.lan = %d, want 200", code)
	}
}

// getWithHost asks base+path with the Host header host.
func getWithHost(t *testing.T, base, host, path string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A page of another site that points its name at this machine (DNS
// rebinding) sends its own name as Host: the loopback console refuses it
// (421) and answers its loopback names; --allowed-hosts adds the name a
// reverse proxy forwards.
func TestWeb_AnswersOnlyItsHostNames(t *testing.T) {
	t.Parallel()
	dir := webStores(t)
	addr := startWeb(t, dir, "--listen", "127.0.0.1:0", "--receiver", "")
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + addr
	for host, want := range map[string]int{
		addr: 200, "localhost:" + port: 200, "[::1]:" + port: 200,
		"evil.example:" + port: http.StatusMisdirectedRequest, "console.example.com": http.StatusMisdirectedRequest,
	} {
		code, body := getWithHost(t, base, host, "/quarantined", nil)
		if code != want {
			t.Errorf("loopback console: GET /quarantined with Host %q = %d, want %d", host, code, want)
		}
		if code != 200 && strings.Contains(body, "e1") {
			t.Errorf("loopback console: a refused Host %q reads the queue:\n%s", host, body)
		}
	}
	addr = startWeb(t, dir, "--listen", "127.0.0.1:0", "--receiver", "", "--allowed-hosts", "console.example.com, relay.example.com:8443")
	base = "http://" + addr
	for host, want := range map[string]int{
		addr: 200, "console.example.com": 200, "Console.Example.com:443": 200, "relay.example.com:8443": 200,
		"relay.example.com": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
	} {
		if code, _ := getWithHost(t, base, host, "/quarantined", nil); code != want {
			t.Errorf("--allowed-hosts: GET /quarantined with Host %q = %d, want %d", host, code, want)
		}
	}
}

func TestWeb_RefusesToStartOpenBeyondLoopback(t *testing.T) {
	dir := webStores(t)
	t.Setenv(tokenEnv, "")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, exitUsage, "not a loopback address: give a token"},
		{[]string{"--listen", ":0"}, exitUsage, "not a loopback address"},
		{[]string{"--token", "short"}, exitUsage, "16..1000 bytes"},
		{[]string{"--token", strings.Repeat("a", 32) + "\r"}, exitUsage, "--token or $" + tokenEnv + ": console: invalid options: the token is 33 bytes"},
		{[]string{"--listen", "nonsense"}, exitUsage, "--listen"},
		{[]string{"--queue", "nope.db"}, exitFail, "does not exist"},
		{[]string{"extra"}, exitUsage, "unexpected argument"},
		{[]string{"--allowed-hosts", "http://console.example.com"}, exitUsage, "--allowed-hosts"},
		{[]string{"--allowed-hosts", "a b"}, exitUsage, "--allowed-hosts"},
	} {
		var stderr strings.Builder
		e := newEnv(strings.NewReader(""), io.Discard, &stderr)
		e.dir = dir
		if code := e.main(append([]string{"web"}, tc.args...)); code != tc.code {
			t.Errorf("relayctl web %q: exit %d, want %d (%s)", tc.args, code, tc.code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("relayctl web %q: stderr %q, want %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:9": true,
		"0.0.0.0:80": false, ":80": false, "192.168.1.4:80": false, "[::]:80": false, "example.com:80": false,
	} {
		got, err := isLoopback(addr)
		if err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
}

// A queue run in real time (its clock mark is Unix milliseconds) is
// redriven at this machine's clock, as relayctl redrive would.
func TestWeb_RealTimeQueueRedrivesAtTheWallClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Wall{}.Now()
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "e1", Flow: "f1", Body: []byte(`{"delta": 1}`)}, start); err != nil {
		t.Fatal(err)
	}
	now := start
	for range 3 {
		c, ok, err := q.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", now, ok, err)
		}
		if _, err := q.Settle(ctx, c.EventID, c.Generation, queuestore.Result{Reason: "unavailable"}, now); err != nil {
			t.Fatal(err)
		}
		now += 10
	}
	q.Close()
	addr := startWeb(t, dir, "--listen", "127.0.0.1:0", "--token", webToken, "--receiver", "")
	base := "http://" + addr
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/event?id=e1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, _ := url.Parse(base)
	var csrf string
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "fairrelay_csrf" {
			csrf = ck.Value
		}
	}
	// The mark is start+20 ms; let the wall clock move well past it, so a
	// redrive at the mark and one at the clock cannot be confused.
	time.Sleep(100 * time.Millisecond)
	before := clock.Wall{}.Now()
	resp, err = c.PostForm(base+"/redrive", url.Values{"id": {"e1"}, "generation": {"3"}, "reason": {"receiver back"}, "csrf": {csrf}, "token": {webToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /redrive = %d, want 303", resp.StatusCode)
	}
	q, err = queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	a, err := q.AuditPage(ctx, queuestore.AuditQuery{EventID: "e1"})
	if err != nil || len(a.Entries) != 1 {
		t.Fatalf("audit of e1 = %+v, %v; want one row", a, err)
	}
	if at := a.Entries[0].At; at < before {
		t.Errorf("the redrive was written at tick %d, before the wall clock %d when it was sent: not at the wall clock", at, before)
	}
}

func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen   string
		loopback bool
		list     string
		set      bool
		want     []string
	}{
		{"127.0.0.1:8080", true, "", false, nil},
		{"0.0.0.0:8080", false, "", false, []string{"*"}},
		{"127.0.0.1:8080", true, "console.example.com, relay.example.com:8443,", true, []string{"console.example.com", "relay.example.com:8443", "127.0.0.1"}},
		{"192.168.1.4:8080", false, "relay-box.lan", true, []string{"relay-box.lan", "192.168.1.4"}},
		{"0.0.0.0:8080", false, "relay-box.lan", true, []string{"relay-box.lan"}},
		{":8080", false, "relay-box.lan", true, []string{"relay-box.lan"}},
		{"[::]:8080", false, "*", true, []string{"*"}},
	} {
		if got := allowedHosts(tc.listen, tc.loopback, tc.list, tc.set); !slices.Equal(got, tc.want) {
			t.Errorf("allowedHosts(%q, %v, %q, %v) = %q, want %q", tc.listen, tc.loopback, tc.list, tc.set, got, tc.want)
		}
	}
}
