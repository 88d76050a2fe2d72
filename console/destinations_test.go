package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/console/internal/browser"
	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/queue"
)

// The secret texts seeded: no page may show them.
const (
	billingSecret = "billing-secret-text-0001"
	crmSecret     = "whsec_Y3JtLXNlY3JldC1rZXktYnl0ZXM="
)

// destStore is the test queue as a queue.DestinationStore (both backends
// are one).
func destStore(t testing.TB, q testQueue) queue.DestinationStore {
	t.Helper()
	d, ok := q.(queue.DestinationStore)
	if !ok {
		t.Fatalf("%T is not a queue.DestinationStore", q)
	}
	return d
}

// seedDestinations registers billing (limits, two secrets) and crm, and
// enqueues three flows of each beside the demo's default-destination flows.
func seedDestinations(t testing.TB, q testQueue) {
	t.Helper()
	ctx := context.Background()
	now, err := q.ClockMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds := destStore(t, q)
	for _, d := range []queue.Destination{
		{Name: "billing", URL: "https://billing.internal/hooks", Secrets: []string{billingSecret, "billing-secret-text-0002"}, Concurrency: 8, Rate: 200},
		{Name: "crm", URL: "https://crm.internal/in", Secrets: []string{crmSecret}},
	} {
		if err := ds.PutDestination(ctx, d, "receiver "+d.Name+" (OPS-1410)", now); err != nil {
			t.Fatalf("PutDestination(%s) = %v", d.Name, err)
		}
	}
	var es []queue.Event
	for _, f := range []struct{ flow, dest string }{
		{"initech/invoices", "billing"}, {"initech/refunds", "billing"}, {"umbrella/invoices", "billing"},
		{"initech/contacts", "crm"}, {"umbrella/contacts", "crm"}, {"umbrella/leads", "crm"},
	} {
		for i := range 3 {
			es = append(es, queue.Event{ID: f.flow + "-" + string(rune('1'+i)), Flow: f.flow, Body: []byte(`{"delta": 1}`), Destination: f.dest})
		}
	}
	if _, err := q.EnqueueBatch(ctx, es, now); err != nil {
		t.Fatalf("EnqueueBatch() = %v", err)
	}
}

func TestDestinations_ShownOnThePages(t *testing.T) {
	forEachBackend(t, destinationsShownOnThePages)
}

func destinationsShownOnThePages(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	c := f.client(t)
	_, body := f.get(t, c, "/destinations")
	mustContain(t, "destinations page without any", body, "No destination is registered")
	_, body = f.get(t, c, "/")
	if strings.Contains(body, `href="/destinations"><span class="n">`) {
		t.Errorf("the overview counts destinations before any is registered")
	}
	_, body = f.get(t, c, "/flows")
	if strings.Contains(body, "<th>destination</th>") {
		t.Errorf("the flows page shows a destination column before any flow has a destination")
	}
	seedDestinations(t, f.q)
	_, body = f.get(t, c, "/destinations")
	mustContain(t, "destinations page", body,
		`<a href="/destination?name=billing">billing</a>`, "https://billing.internal/hooks", "https://crm.internal/in",
		"Breaker states and delivery failures live in the relays")
	// billing: 2 secrets, concurrency 8, rate 200, 3 flows, backlog 9.
	row := between(t, body, `<a href="/destination?name=billing">`, "</tr>")
	for _, cell := range []string{`<td class="num">2</td>`, `<td class="num">8</td>`, `<td class="num">200</td>`, `<td class="num">3</td>`, `<td class="num">9</td>`, "running"} {
		if !strings.Contains(row, cell) {
			t.Errorf("billing's row does not have %s:\n%s", cell, row)
		}
	}
	_, body = f.get(t, c, "/destination?name=crm")
	mustContain(t, "crm's page", body, `action="/destination/pause"`, "1 (the relays sign with each; never shown)", "no limit")
	if err := destStore(t, f.q).PauseDestination(context.Background(), "crm", "crm maintenance until 14:00", 1<<40); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, c, "/destination?name=crm")
	mustContain(t, "paused crm's page", body, `action="/destination/resume"`, `<span id="pause-reason">crm maintenance until 14:00</span>`)
	_, body = f.get(t, c, "/destinations")
	mustContain(t, "destinations page with a pause", body, `<span class="state paused" title="crm maintenance until 14:00">paused</span>`)
	_, body = f.get(t, c, "/")
	mustContain(t, "overview", body, `<a class="card" href="/destinations"><span class="n">2</span><span>destinations</span></a>`)
	_, body = f.get(t, c, "/flows?q=initech")
	mustContain(t, "flows page", body, "<th>destination</th>", `<a href="/destination?name=billing">billing</a>`, `<a href="/destination?name=crm">crm</a>`)
	_, body = f.get(t, c, "/flow?name="+url.QueryEscape("umbrella/leads"))
	mustContain(t, "flow page", body, `<tr><th>destination</th><td><a href="/destination?name=crm">crm</a></td></tr>`)
	_, body = f.get(t, c, "/audit")
	mustContain(t, "audit page", body, "destination &#34;billing&#34; registered: https://billing.internal/hooks, 2 secrets, concurrency 8, rate 200",
		"pause of destination &#34;crm&#34;", "crm maintenance until 14:00")
	// No page shows a secret's text.
	for _, p := range []string{"/", "/destinations", "/destination?name=billing", "/destination?name=crm", "/flows", "/audit"} {
		_, body := f.get(t, c, p)
		for _, s := range []string{billingSecret, crmSecret, "billing-secret-text-0002"} {
			if strings.Contains(body, s) {
				t.Errorf("%s shows a secret's text", p)
			}
		}
	}
	// A read-only console shows the state and the command, no form.
	ro := serve(t, f.q, nil, Options{})
	_, body = ro.get(t, ro.client(t), "/destination?name=crm")
	mustContain(t, "read-only destination page", body, "relayctl destinations resume crm")
	if strings.Contains(body, `action="/destination/resume"`) {
		t.Errorf("a read-only console shows the resume form")
	}
	if code, _ := f.get(t, c, "/destination?name=nosuch"); code != http.StatusNotFound {
		t.Errorf("an unknown destination's page = %d, want 404", code)
	}
	if code, _ := f.get(t, c, "/destination?name=Bad%20Name"); code != http.StatusBadRequest {
		t.Errorf("a bad destination name's page = %d, want 400", code)
	}
}

// between is the part of s from the first from to the next to after it.
func between(t testing.TB, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("%q not found", from)
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		t.Fatalf("%q not found after %q", to, from)
	}
	return s[i : i+j]
}

func TestDestinations_PauseRefusalsChangeNothing(t *testing.T) {
	forEachBackend(t, destinationPauseRefusals)
}

func destinationPauseRefusals(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	seedDestinations(t, f.q)
	good := func(csrf string) url.Values {
		return url.Values{"name": {"billing"}, "reason": {"billing maintenance"}, "token": {testToken}, "csrf": {csrf}}
	}
	with := func(k, v string) func(string) url.Values {
		return func(csrf string) url.Values {
			f := good(csrf)
			f.Set(k, v)
			return f
		}
	}
	without := func(k string) func(string) url.Values {
		return func(csrf string) url.Values {
			f := good(csrf)
			f.Del(k)
			return f
		}
	}
	// The checks every write passes, exactly as a flow's pause.
	auth := []writeCase{
		{name: "no token", form: without("token"), code: 403, wants: "Token required"},
		{name: "wrong token", form: with("token", testToken+"x"), code: 403, wants: "Wrong token"},
		{name: "no csrf field", form: without("csrf"), code: 403, wants: "Form expired"},
		{name: "no csrf cookie", form: with("csrf", strings.Repeat("a", 64)), noCookie: true, code: 403, wants: "Form expired"},
		{name: "cross-site", form: good, header: http.Header{"Sec-Fetch-Site": {"cross-site"}}, code: 403, wants: "Cross-site"},
		{name: "no name", form: without("name"), code: 400, wants: "destination&#39;s name"},
		{name: "no reason", form: without("reason"), code: 400, wants: "A reason is required"},
		{name: "control in reason", form: with("reason", "a\x00b"), code: 400, wants: "printable"},
		{name: "unknown destination", form: with("name", "nosuch"), code: 404, wants: "No such destination"},
	}
	checkRefusals(t, f, "/destination/pause", auth)
	checkRefusals(t, f, "/destination/resume", []writeCase{{name: "not paused", form: good, code: 409, wants: "Not paused"}})
	if err := destStore(t, f.q).PauseDestination(context.Background(), "billing", "seeded pause", 1<<40); err != nil {
		t.Fatal(err)
	}
	checkRefusals(t, f, "/destination/pause", []writeCase{{name: "already paused", form: good, code: 409, wants: "Already paused"}})
	checkRefusals(t, f, "/destination/resume", auth)
	for _, p := range []string{"/destination/pause", "/destination/resume"} {
		if code, _ := f.get(t, f.client(t), p); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s = %d, want 405", p, code)
		}
	}
}

func TestBrowser_DestinationPauseAndResume(t *testing.T) {
	forEachBackend(t, browserDestinationPauseAndResume)
}

func browserDestinationPauseAndResume(t *testing.T, b backend) {
	ctx := startBrowser(t)
	f := newFixtureOn(t, b, Options{Token: testToken})
	seedDestinations(t, f.q)
	text := open(t, ctx, f.srv.URL, "/destinations")
	for _, want := range []string{"billing", "https://crm.internal/in", "running"} {
		if !strings.Contains(text, want) {
			t.Errorf("the destinations page does not show %q:\n%s", want, text)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href="/destination?name=billing"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pause`)),
		typeInto(t, `#pause input[name=reason]`, "billing maintenance (OPS-1502)"),
		typeInto(t, `#pause input[name=token]`, testToken),
		chromedp.Click(chromedp.CSS(`#pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("pause through the form: %v", err)
	}
	text = mainText(t, ctx)
	for _, want := range []string{"Paused: no claim picks this destination's flows", "billing maintenance (OPS-1502)", "Resume billing"} {
		if !strings.Contains(text, want) {
			t.Errorf("page after the pause does not show %q:\n%s", want, text)
		}
	}
	if st := destState(t, f.q, "billing"); !st.Paused || st.PauseReason != "billing maintenance (OPS-1502)" {
		t.Fatalf("billing after the pause form = %+v, want paused with the reason", st)
	}
	// The token is remembered for the tab: the resume form needs only the
	// reason.
	open(t, ctx, f.srv.URL, "/destination?name=billing")
	if err := chromedp.Do(ctx,
		typeInto(t, `#pause input[name=reason]`, "maintenance over"),
		chromedp.Click(chromedp.CSS(`#pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("resume through the form: %v", err)
	}
	if text = mainText(t, ctx); !strings.Contains(text, "Resumed: its flows can be claimed again") || !strings.Contains(text, "Pause billing") {
		t.Errorf("page after the resume:\n%s", text)
	}
	if st := destState(t, f.q, "billing"); st.Paused {
		t.Fatalf("billing after the resume form = %+v, want it running", st)
	}
	text = open(t, ctx, f.srv.URL, "/audit")
	for _, want := range []string{`pause of destination "billing"`, "billing maintenance (OPS-1502)", `resume of destination "billing"`, "maintenance over"} {
		if !strings.Contains(text, want) {
			t.Errorf("the audit page does not show %q:\n%s", want, text)
		}
	}
}

// destState reads one destination's state from the store.
func destState(t testing.TB, q testQueue, name string) queue.DestinationState {
	t.Helper()
	ds, err := destStore(t, q).Destinations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no destination %s in %+v", name, ds)
	return queue.DestinationState{}
}

// screenshotDestinations writes destinations.png to out (TestScreenshots
// calls it): the Destinations page of the demo queue with two destinations
// registered, one paused, two claims of the other in flight, and a relay
// that sees the other's breaker open. Its own queue:
// the other screenshots keep their flows without destinations.
func screenshotDestinations(t *testing.T, out string) {
	ctx := context.Background()
	q, r := openSQLite(t)
	if _, err := demo.Seed(ctx, q, r); err != nil {
		t.Fatal(err)
	}
	seedDestinations(t, q)
	mark, err := q.ClockMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := destStore(t, q).PauseDestination(ctx, "crm", "crm maintenance until 14:00 UTC (OPS-1502)", mark); err != nil {
		t.Fatal(err)
	}
	// Two of billing's heads in flight, as a relay would hold them.
	f := queue.ClaimFilter{Exclude: []string{queue.DefaultDestination, "crm"}}
	if cs, err := destStore(t, q).ClaimFor(ctx, mark, 2, f); err != nil || len(cs) != 2 {
		t.Fatalf("ClaimFor(billing) = %d claims, %v", len(cs), err)
	}
	// One relay's view (relayctl web --relay ADDR): billing's breaker open.
	var saw bool
	relays := func(ctx context.Context) []RelayStatus { return fakeRelays(&saw)(ctx)[:1] }
	h, err := New(q, r, Options{Token: screenshotToken, Logger: slog.New(slog.DiscardHandler), Relays: relays})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	bctx, cancel, err := browser.Start(ctx, filepath.Join(t.TempDir(), "profile"), 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/destinations"), chromedp.WaitVisible(chromedp.CSS("#destinations"))); err != nil {
		t.Fatal(err)
	}
	if err := saveScreenshot(bctx, out, "destinations"); err != nil {
		t.Fatal(err)
	}
}

// fakeRelays is a Options.Relays of two relays: one that sees billing's
// breaker open after 5 failures in a row and crm closed, and one that
// cannot be read. It records that it was given a deadline.
func fakeRelays(sawDeadline *bool) func(ctx context.Context) []RelayStatus {
	return func(ctx context.Context) []RelayStatus {
		_, *sawDeadline = ctx.Deadline()
		opened := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		return []RelayStatus{
			{Relay: "127.0.0.1:9464", Destinations: []RelayDestination{
				{Name: "", Breaker: "closed", Delivered: 40},
				{Name: "billing", Breaker: "open", Since: opened, NextProbe: opened.Add(8 * time.Second), ConsecutiveFailures: 5, LastReason: "http_503", Delivered: 3, Failed: 7},
				{Name: "crm", Breaker: "closed", Delivered: 12, InFlight: 2},
			}},
			{Relay: "127.0.0.1:9465", Err: errors.New("connection refused")},
		}
	}
}

func TestDestinations_RelaysBreakersShown(t *testing.T) {
	var saw bool
	f := newFixture(t, Options{Token: testToken, Relays: fakeRelays(&saw)})
	seedDestinations(t, f.q)
	c := f.client(t)
	_, body := f.get(t, c, "/destinations")
	if !saw {
		t.Errorf("Options.Relays was called without a deadline")
	}
	mustContain(t, "destinations page with relays", body, "<th>breaker</th>", `<th class="num">failures</th>`,
		"relay 127.0.0.1:9465 could not be read</strong> (connection refused)")
	if strings.Contains(body, "this page does not show them") {
		t.Errorf("the destinations page with relays still says it does not show breakers")
	}
	row := between(t, body, `<a href="/destination?name=billing">`, "</tr>")
	for _, cell := range []string{`<span class="state breaker-open" title="last failure: http_503">open</span> <span class="muted">127.0.0.1:9464</span>`,
		`7 <span class="muted">(5 in a row)</span>`, `<span class="state unreachable" title="connection refused">unreachable</span>`} {
		if !strings.Contains(row, cell) {
			t.Errorf("billing's row does not have %s:\n%s", cell, row)
		}
	}
	row = between(t, body, `<a href="/destination?name=crm">`, "</tr>")
	if !strings.Contains(row, `<span class="state breaker-closed">closed</span>`) || strings.Contains(row, "breaker-open") {
		t.Errorf("crm's row does not show its breaker closed:\n%s", row)
	}
	_, body = f.get(t, c, "/destination?name=billing")
	tbl := between(t, body, `<table class="relays" id="relays">`, "</table>")
	for _, cell := range []string{"<code>127.0.0.1:9464</code>", "breaker-open", "2026-12-04 12:00:00 UTC", "2026-12-04 12:00:08 UTC",
		`<td class="num">5</td>`, "<td>http_503</td>", `<td class="num">3</td>`, `<td class="num">7</td>`, "<code>127.0.0.1:9465</code>", "unreachable"} {
		if !strings.Contains(tbl, cell) {
			t.Errorf("billing's relays table does not have %s:\n%s", cell, tbl)
		}
	}
	// Without Options.Relays the pages say where the breakers are.
	plain := serve(t, f.q, nil, Options{})
	_, body = plain.get(t, plain.client(t), "/destinations")
	mustContain(t, "destinations page without relays", body, "relayctl web --relay ADDR")
	if strings.Contains(body, "<th>breaker</th>") {
		t.Errorf("the destinations page without relays has a breaker column")
	}
}

func TestBrowser_DestinationBreakers(t *testing.T) {
	ctx := startBrowser(t)
	var saw bool
	f := newFixture(t, Options{Token: testToken, Relays: fakeRelays(&saw)})
	seedDestinations(t, f.q)
	open(t, ctx, f.srv.URL, "/destinations")
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#destinations tbody tr")].map(r => r.cells[9].innerText.replace(/\s+/g, " ").trim() + " | " + r.cells[10].innerText.replace(/\s+/g, " ").trim())`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"open 127.0.0.1:9464 unreachable 127.0.0.1:9465 | 7 (5 in a row) —", "closed 127.0.0.1:9464 unreachable 127.0.0.1:9465 | 0 —"}
	if strings.Join(cells, "\n") != strings.Join(want, "\n") {
		t.Errorf("the breaker and failures columns:\n%s\nwant:\n%s", strings.Join(cells, "\n"), strings.Join(want, "\n"))
	}
}

// TestDestinations_LateRelaysDoNotHoldThePage: an Options.Relays that
// ignores its deadline does not hold the page past it; the page says the
// relays did not answer in time and shows the queue's view.
func TestDestinations_LateRelaysDoNotHoldThePage(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	q := newFixture(t, Options{}).q
	seedDestinations(t, q)
	h, err := New(q, nil, Options{Logger: slog.New(slog.DiscardHandler), Relays: func(context.Context) []RelayStatus {
		<-release // deaf to its context
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.(*console).relaysWait = 20 * time.Millisecond // before any request
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/destinations")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /destinations = %d", resp.StatusCode)
	}
	mustContain(t, "destinations page with a late relay source", string(b), "the relays did not answer in time", `<a href="/destination?name=billing">billing</a>`)
}
