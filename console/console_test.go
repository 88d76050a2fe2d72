package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
)

const testToken = "test-token-0123456789abcdef"

// fixture is a console over a seeded real queue.db and receiver.db, served
// on a loopback port.
type fixture struct {
	q   testQueue
	r   receiver.Store
	srv *httptest.Server
	log *bytes.Buffer
}

// openStores opens a new SQLite queue and receiver.
func openStores(t testing.TB) (testQueue, receiver.Store) { return openSQLite(t) }

func newFixture(t testing.TB, o Options) *fixture { return newFixtureOn(t, sqliteBackend, o) }

// newFixtureOn is a console over a seeded queue and receiver of backend b.
func newFixtureOn(t testing.TB, b backend, o Options) *fixture {
	t.Helper()
	q, r := b.open(t)
	if _, err := demo.Seed(context.Background(), q, r); err != nil {
		t.Fatalf("demo.Seed() error = %v", err)
	}
	return serve(t, q, r, o)
}

func serve(t testing.TB, q Queue, r Receiver, o Options) *fixture {
	t.Helper()
	f := &fixture{log: &bytes.Buffer{}}
	f.q, _ = q.(testQueue)
	f.r, _ = r.(receiver.Store)
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(f.log, nil))
	}
	h, err := New(q, r, o)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// client is a browser-like client: cookies kept, redirects not followed
// (the tests look at them).
func (f *fixture) client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) get(t testing.TB, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(f.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s error = %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s read error = %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// csrf loads a page so the client gets its CSRF cookie, and returns it.
func (f *fixture) csrf(t testing.TB, c *http.Client) string {
	t.Helper()
	f.get(t, c, "/audit")
	u, _ := url.Parse(f.srv.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == csrfCookie {
			return ck.Value
		}
	}
	t.Fatal("no CSRF cookie after a page load")
	return ""
}

func (f *fixture) post(t testing.TB, c *http.Client, path string, form url.Values, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s error = %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func mustContain(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: page does not contain %q", what, w)
		}
	}
}

func quarantined(t testing.TB, q queue.Store, f queue.RedriveFilter) []queue.QuarantinedEvent {
	t.Helper()
	qs, err := q.QuarantinedMatching(context.Background(), f)
	if err != nil {
		t.Fatalf("QuarantinedMatching() error = %v", err)
	}
	return qs
}

func TestPages_ShowTheSeededStores(t *testing.T) {
	forEachBackend(t, pagesShowTheSeededStores)
}

func pagesShowTheSeededStores(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	c := f.client(t)
	qs := quarantined(t, f.q, queuestore.RedriveFilter{})
	if len(qs) < 3 {
		t.Fatalf("the seed quarantined %d events, want several", len(qs))
	}
	ctx := context.Background()
	st, err := f.q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stuck := qs[0]
	refunds, err := f.q.FlowEvents(ctx, "acme/refunds")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		wants []string
	}{
		{"/", []string{"<svg", "Backlog of the busiest flows", "Served turns per flow", "Events by state",
			"unsupported_delta", "unavailable", "min_served", ">" + itoa(st.Quarantined) + "<", "sum of totals"}},
		{"/flows", []string{"acme/invoices", "globex/chat-17", "umbrella/sensors"}},
		{"/flows?sort=backlog", []string{"initech/billing", "quarantined"}},
		{"/flows?sort=served", []string{"umbrella/sensors"}},
		{"/flows?sort=blocked", []string{"quarantined"}},
		{"/flows?q=" + url.QueryEscape("acme/"), []string{"acme/orders", "acme/refunds"}},
		{"/flow?name=" + url.QueryEscape("acme/refunds"), []string{refunds[0].ID, "head", "unsupported_delta", "quarantined",
			"retry after the deploy of 14:05 (ticket OPS-1182)"}},
		{"/flow?name=" + url.QueryEscape("acme/orders"), []string{"No event of this flow has been redriven."}},
		{"/event?id=" + url.QueryEscape(stuck.EventID), []string{stuck.EventID, stuck.Flow, stuck.Reason, `action="/redrive"`, `name="csrf"`}},
		{"/event?id=" + url.QueryEscape(refunds[0].ID), []string{"retry after the deploy of 14:05 (ticket OPS-1182)"}},
		{"/quarantined", []string{stuck.EventID, `action="/redrive-all"`, itoa(int64(len(qs))) + " matching"}},
		{"/quarantined?reason=unavailable", []string{"globex/chat-19", "umbrella/alerts"}},
		{"/audit", []string{"redrive", "OPS-1182", "policy: lease 5 → 8", "OPS-1185"}},
		{"/receiver", []string{"acme-orders-001", "conflict", "acme/orders"}},
		{"/static/style.css", []string{"--accent"}},
		{"/static/console.js", []string{"sessionStorage"}},
	} {
		code, body := f.get(t, c, tc.path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200\n%s", tc.path, code, body)
			continue
		}
		mustContain(t, tc.path, body, tc.wants...)
	}
	// Filters leave the others out.
	_, body := f.get(t, c, "/flows?q="+url.QueryEscape("acme/"))
	if strings.Contains(body, "globex/") {
		t.Errorf("/flows?q=acme/ lists a globex flow")
	}
	_, body = f.get(t, c, "/quarantined?reason=unavailable")
	if strings.Contains(body, "acme/refunds</a>") {
		t.Errorf("/quarantined?reason=unavailable lists acme/refunds (unsupported_delta)")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// The pager walks every flow once, forward by Next.
func TestFlows_PagerWalksEveryFlow(t *testing.T) {
	forEachBackend(t, flowsPagerWalksEveryFlow)
}

func flowsPagerWalksEveryFlow(t *testing.T, b backend) {
	t.Parallel()
	q, r := b.open(t)
	var es []queuestore.Event
	for i := range 230 {
		es = append(es, queuestore.Event{ID: "e" + fmtInt(int64(i)), Flow: "tenant-" + pad(i), Body: []byte(`{"delta": 1}`)})
	}
	if _, err := q.EnqueueBatch(context.Background(), es, 0); err != nil {
		t.Fatal(err)
	}
	f := serve(t, q, r, Options{PageSize: 50})
	c := f.client(t)
	seen := map[string]bool{}
	path := "/flows?sort=flow"
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("the pager does not end")
		}
		code, body := f.get(t, c, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		for i := range 230 {
			if strings.Contains(body, ">tenant-"+pad(i)+"<") {
				if seen[pad(i)] {
					t.Errorf("tenant-%s listed on two pages", pad(i))
				}
				seen[pad(i)] = true
			}
		}
		path = nextLink(body)
	}
	if len(seen) != 230 {
		t.Errorf("the pager showed %d flows, want 230", len(seen))
	}
	// The last page holds the last flows.
	_, body := f.get(t, c, "/flows?sort=flow&last=1")
	mustContain(t, "last page", body, ">tenant-229<", ">tenant-180<")
}

func pad(i int) string {
	s := fmtInt(int64(i))
	return strings.Repeat("0", 3-len(s)) + s
}

// nextLink returns the href of the page's rel=next link, "" when none.
func nextLink(body string) string {
	_, rest, ok := strings.Cut(body, `rel="next" href="`)
	if !ok {
		return ""
	}
	href, _, _ := strings.Cut(rest, `"`)
	return strings.ReplaceAll(href, "&amp;", "&")
}

func TestPages_RefuseBadInput(t *testing.T) {
	forEachBackend(t, pagesRefuseBadInput)
}

func pagesRefuseBadInput(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	c := f.client(t)
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/flows?sort=weight", http.StatusBadRequest},
		{"/flows?after=garbage", http.StatusBadRequest},
		{"/flows?after=1:a&before=1:b", http.StatusBadRequest},
		{"/flows?q=" + url.QueryEscape("a\x00"), http.StatusBadRequest},
		{"/flows?q=" + strings.Repeat("x", 201), http.StatusBadRequest},
		{"/flow", http.StatusBadRequest},
		{"/flow?name=" + url.QueryEscape(" acme/orders"), http.StatusBadRequest},
		{"/flows?q=" + url.QueryEscape(" acme"), http.StatusBadRequest},
		{"/quarantined?reason=" + url.QueryEscape("   "), http.StatusBadRequest},
		{"/audit?event=" + url.QueryEscape("e1 "), http.StatusBadRequest},
		{"/flow?name=" + url.QueryEscape("no/such"), http.StatusNotFound},
		{"/event", http.StatusBadRequest},
		{"/event?id=" + url.QueryEscape("a\x07"), http.StatusBadRequest},
		{"/event?id=nope", http.StatusNotFound},
		{"/quarantined?flow=" + url.QueryEscape("\x00"), http.StatusBadRequest},
		{"/quarantined?after=nope", http.StatusBadRequest},
		{"/audit?before=x", http.StatusBadRequest},
		{"/audit?before=-3", http.StatusBadRequest},
		{"/audit?event=" + url.QueryEscape("\x01"), http.StatusBadRequest},
		{"/nothing-here", http.StatusNotFound},
		{"/redrive", http.StatusMethodNotAllowed},
		{"/redrive-all", http.StatusMethodNotAllowed},
	} {
		code, body := f.get(t, c, tc.path)
		if code != tc.code {
			t.Errorf("GET %s = %d, want %d\n%s", tc.path, code, tc.code, body)
		}
		if strings.Contains(body, "queuestore:") {
			t.Errorf("GET %s shows a store's error text:\n%s", tc.path, body)
		}
	}
}

func TestHeaders_StrictPolicyOnEveryAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	for _, p := range []string{"/", "/flows", "/nothing", "/static/style.css"} {
		resp, err := http.Get(f.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s Content-Security-Policy = %q", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s has no nosniff", p)
		}
	}
}

// writeCase is one attempt at a write, and what must come of it.
type writeCase struct {
	name   string
	form   func(csrf string) url.Values
	header http.Header
	// noCookie sends the form from a client that never loaded a page.
	noCookie bool
	code     int
	wants    string
}

// checkRefusals runs every case against path and checks that each is
// refused with its status and that nothing changed in the queue.
func checkRefusals(t *testing.T, f *fixture, path string, cases []writeCase) {
	t.Helper()
	ctx := context.Background()
	before, err := f.q.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		c := f.client(t)
		csrf := ""
		if !tc.noCookie {
			csrf = f.csrf(t, c)
		}
		resp, body := f.post(t, c, path, tc.form(csrf), tc.header)
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: status %d, want %d\n%s", path, tc.name, resp.StatusCode, tc.code, body)
		}
		if tc.wants != "" && !strings.Contains(body, tc.wants) {
			t.Errorf("%s %s: page does not say %q\n%s", path, tc.name, tc.wants, body)
		}
		if strings.Contains(body, "queuestore:") {
			t.Errorf("%s %s: page shows a store's error text", path, tc.name)
		}
	}
	after, err := f.q.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("%s: a refused write changed the queue", path)
	}
}

func TestRedrive_RefusalsChangeNothing(t *testing.T) {
	forEachBackend(t, redriveRefusalsChangeNothing)
}

func redriveRefusalsChangeNothing(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{Flow: "globex/chat-19"})[0]
	acked, err := f.q.FlowEvents(context.Background(), "acme/orders")
	if err != nil {
		t.Fatal(err)
	}
	good := func(csrf string) url.Values {
		return url.Values{"id": {stuck.EventID}, "generation": {fmtInt(stuck.Generation)}, "reason": {"fixed"}, "token": {testToken}, "csrf": {csrf}}
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
	checkRefusals(t, f, "/redrive", []writeCase{
		{name: "no token", form: without("token"), code: 403, wants: "Token required"},
		{name: "wrong token", form: with("token", testToken+"x"), code: 403, wants: "Wrong token"},
		{name: "wrong bearer", form: without("token"), header: http.Header{"Authorization": {"Bearer nope-nope-nope-nope"}}, code: 403, wants: "Wrong token"},
		{name: "no csrf field", form: without("csrf"), code: 403, wants: "Form expired"},
		{name: "csrf mismatch", form: with("csrf", strings.Repeat("a", 64)), code: 403, wants: "Form expired"},
		{name: "no csrf cookie", form: with("csrf", strings.Repeat("a", 64)), noCookie: true, code: 403, wants: "Form expired"},
		{name: "cross-site", form: good, header: http.Header{"Sec-Fetch-Site": {"cross-site"}}, code: 403, wants: "Cross-site"},
		{name: "other origin", form: good, header: http.Header{"Origin": {"https://evil.example"}}, code: 403, wants: "Cross-site"},
		{name: "no reason", form: without("reason"), code: 400, wants: "A reason is required"},
		{name: "blank reason", form: with("reason", "   "), code: 400, wants: "A reason is required"},
		{name: "control in reason", form: with("reason", "a\x00b"), code: 400, wants: "printable"},
		{name: "long reason", form: with("reason", strings.Repeat("r", 1001)), code: 400, wants: "printable"},
		{name: "no generation", form: without("generation"), code: 400, wants: "generation"},
		{name: "bad generation", form: with("generation", "-1"), code: 400, wants: "generation"},
		{name: "stale generation", form: with("generation", fmtInt(stuck.Generation-1)), code: 409, wants: "changed"},
		{name: "not quarantined", form: func(csrf string) url.Values {
			f := good(csrf)
			f.Set("id", acked[0].ID)
			f.Set("generation", fmtInt(acked[0].Generation))
			return f
		}, code: 409, wants: "Not quarantined"},
		{name: "unknown event", form: with("id", "no-such-event"), code: 404, wants: "No such event"},
		{name: "form too large", form: with("reason", strings.Repeat("r", maxForm+1)), code: 413},
	})
}

func TestRedrive_ReadOnlyConsoleRefusesEveryWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{})[0]
	form := func(csrf string) url.Values {
		return url.Values{"id": {stuck.EventID}, "generation": {fmtInt(stuck.Generation)}, "reason": {"fixed"},
			"token": {"anything-at-all-1234"}, "csrf": {csrf}, "flow": {""}, "filter_reason": {""}}
	}
	for _, p := range []string{"/redrive", "/redrive-all"} {
		checkRefusals(t, f, p, []writeCase{{name: "read-only", form: form, code: 403, wants: "read-only"}})
	}
	_, body := f.get(t, f.client(t), "/event?id="+url.QueryEscape(stuck.EventID))
	if strings.Contains(body, `action="/redrive"`) {
		t.Errorf("a read-only console shows a redrive form")
	}
}

func TestRedrive_OneEventThroughTheForm(t *testing.T) {
	forEachBackend(t, redriveOneEventThroughTheForm)
}

func redriveOneEventThroughTheForm(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{Flow: "globex/chat-19"})[0]
	c := f.client(t)
	csrf := f.csrf(t, c)
	resp, body := f.post(t, c, "/redrive", url.Values{"id": {stuck.EventID}, "generation": {fmtInt(stuck.Generation)},
		"reason": {"receiver back up (OPS-1190)"}, "token": {testToken}, "csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /redrive = %d, want 303\n%s", resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	code, page := f.get(t, c, loc)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", loc, code)
	}
	mustContain(t, "result", page, "Redriven: generation "+fmtInt(stuck.Generation)+" → "+fmtInt(stuck.Generation+1),
		"receiver back up (OPS-1190)", "pending")
	e, err := f.q.Event(context.Background(), stuck.EventID)
	if err != nil || e.State != "pending" || e.Generation != stuck.Generation+1 {
		t.Errorf("after the redrive the event is %+v, %v; want pending at generation %d", e, err, stuck.Generation+1)
	}
	a, err := f.q.AuditPage(context.Background(), queuestore.AuditQuery{EventID: stuck.EventID})
	if err != nil || len(a.Entries) != 1 || a.Entries[0].Reason != "receiver back up (OPS-1190)" {
		t.Errorf("audit of %s = %+v, %v; want the one row with the form's reason", stuck.EventID, a, err)
	}
	// The same form again is refused: the event moved on.
	resp, _ = f.post(t, c, "/redrive", url.Values{"id": {stuck.EventID}, "generation": {fmtInt(stuck.Generation)},
		"reason": {"again"}, "token": {testToken}, "csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a second POST of the same form = %d, want 409", resp.StatusCode)
	}
	// A program may send the token as a bearer header instead of the field.
	other := quarantined(t, f.q, queuestore.RedriveFilter{Flow: "umbrella/alerts"})[0]
	resp, body = f.post(t, c, "/redrive", url.Values{"id": {other.EventID}, "generation": {fmtInt(other.Generation)},
		"reason": {"alerts fixed"}, "csrf": {csrf}}, http.Header{"Authorization": {"Bearer " + testToken}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("POST /redrive with a bearer token = %d, want 303\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(f.log.String(), "console: redrive") {
		t.Errorf("the server log has no line for the redrive:\n%s", f.log.String())
	}
}

func TestRedriveAll_RefusalsChangeNothing(t *testing.T) {
	forEachBackend(t, redriveAllRefusalsChangeNothing)
}

func redriveAllRefusalsChangeNothing(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	good := func(csrf string) url.Values {
		return url.Values{"flow": {""}, "filter_reason": {"unavailable"}, "reason": {"fixed"}, "token": {testToken}, "csrf": {csrf}}
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
	checkRefusals(t, f, "/redrive-all", []writeCase{
		{name: "no token", form: without("token"), code: 403, wants: "Token required"},
		{name: "wrong token", form: with("token", "x"), code: 403, wants: "Wrong token"},
		{name: "no csrf field", form: without("csrf"), code: 403, wants: "Form expired"},
		{name: "csrf mismatch", form: with("csrf", strings.Repeat("b", 64)), code: 403, wants: "Form expired"},
		{name: "no csrf cookie", form: with("csrf", strings.Repeat("b", 64)), noCookie: true, code: 403, wants: "Form expired"},
		{name: "cross-site", form: good, header: http.Header{"Sec-Fetch-Site": {"cross-site"}}, code: 403, wants: "Cross-site"},
		{name: "no reason", form: without("reason"), code: 400, wants: "A reason is required"},
		{name: "blank reason", form: with("reason", " \u00a0 "), code: 400, wants: "A reason is required"},
		{name: "control in reason", form: with("reason", "line\nbreak"), code: 400, wants: "printable"},
		{name: "bad filter flow", form: with("flow", "\x00"), code: 400, wants: "filter"},
		{name: "bad filter reason", form: with("filter_reason", strings.Repeat("r", 1001)), code: 400, wants: "filter"},
	})
}

func TestRedriveAll_RedrivesTheFilterAndShowsTheAudit(t *testing.T) {
	forEachBackend(t, redriveAllRedrivesTheFilterAndShowsTheAudit)
}

func redriveAllRedrivesTheFilterAndShowsTheAudit(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	filter := queuestore.RedriveFilter{Reason: "unsupported_delta"}
	want := quarantined(t, f.q, filter)
	others := quarantined(t, f.q, queuestore.RedriveFilter{Reason: "unavailable"})
	if len(want) < 2 || len(others) < 1 {
		t.Fatalf("seed: %d unsupported_delta, %d unavailable; want several and some", len(want), len(others))
	}
	c := f.client(t)
	csrf := f.csrf(t, c)
	resp, body := f.post(t, c, "/redrive-all", url.Values{"flow": {""}, "filter_reason": {"unsupported_delta"},
		"reason": {"MaxDelta raised to 1000"}, "token": {testToken}, "csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /redrive-all = %d\n%s", resp.StatusCode, body)
	}
	mustContain(t, "result", body, fmtInt(int64(len(want)))+" quarantined events", "MaxDelta raised to 1000")
	for _, e := range want {
		mustContain(t, "result", body, e.EventID, ">"+fmtInt(e.Generation+1)+"<")
	}
	if got := strings.Count(body, "<td>MaxDelta raised to 1000</td>"); got != len(want) {
		t.Errorf("result page shows %d audit rows with the reason, want %d", got, len(want))
	}
	if left := quarantined(t, f.q, filter); len(left) != 0 {
		t.Errorf("after the redrive %d events still match the filter", len(left))
	}
	if left := quarantined(t, f.q, queuestore.RedriveFilter{Reason: "unavailable"}); len(left) != len(others) {
		t.Errorf("the redrive touched events outside the filter: %d unavailable left, want %d", len(left), len(others))
	}
	// Nothing left to match: a second run redrives none, and says so.
	_, body = f.post(t, c, "/redrive-all", url.Values{"flow": {""}, "filter_reason": {"unsupported_delta"},
		"reason": {"again"}, "token": {testToken}, "csrf": {csrf}}, nil)
	mustContain(t, "second run", body, "0 quarantined events")
}

func TestProtectReads_NeedsSignIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Token: testToken, ProtectReads: true})
	c := f.client(t)
	resp, err := c.Get(f.srv.URL + "/flows?sort=backlog")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Fatalf("GET /flows unsigned = %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/", nil)
	req.Header.Set("Authorization", "Bearer wrong-wrong-wrong-wrong")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET / with a wrong bearer = %v, %v; want 403", resp.StatusCode, err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the bearer = %v, %v; want 200", resp.StatusCode, err)
	}
	code, _ := f.get(t, c, "/login?next=/flows")
	if code != http.StatusOK {
		t.Fatalf("GET /login = %d", code)
	}
	csrf := f.csrf(t, c)
	r, _ := f.post(t, c, "/login", url.Values{"token": {"wrong"}, "csrf": {csrf}, "next": {"/flows"}}, nil)
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("POST /login wrong token = %d, want 403", r.StatusCode)
	}
	r, _ = f.post(t, c, "/login", url.Values{"token": {testToken}, "next": {"/flows"}}, nil)
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("POST /login without CSRF = %d, want 403", r.StatusCode)
	}
	r, _ = f.post(t, c, "/login", url.Values{"token": {testToken}, "csrf": {csrf}, "next": {"//evil.example/x"}}, nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Errorf("POST /login to another host = %d %q, want 303 to /", r.StatusCode, r.Header.Get("Location"))
	}
	code, body := f.get(t, c, "/flows")
	if code != http.StatusOK || !strings.Contains(body, "acme/orders") {
		t.Errorf("GET /flows signed in = %d, want 200 with the flows", code)
	}
}

// failingQueue answers every read with an error carrying a secret, which
// must reach the log and never the browser.
type failingQueue struct{ Queue }

const secret = "disk I/O error at /var/lib/secret/queue.db"

func (failingQueue) Stats(context.Context) (queuestore.Stats, error) {
	return queuestore.Stats{}, errors.New(secret)
}

func (failingQueue) FlowsPage(context.Context, queuestore.FlowQuery) (queuestore.FlowPage, error) {
	return queuestore.FlowPage{}, errors.New(secret)
}

func (failingQueue) FlowEventsFrom(context.Context, string, int64, int) ([]queuestore.EventState, error) {
	return nil, errors.New(secret)
}

func TestInternalErrors_StayInTheLog(t *testing.T) {
	t.Parallel()
	q, r := openStores(t)
	f := serve(t, failingQueue{q}, r, Options{Token: testToken})
	c := f.client(t)
	for _, p := range []string{"/", "/flows", "/flow?name=x"} {
		code, body := f.get(t, c, p)
		if code != http.StatusInternalServerError {
			t.Errorf("GET %s = %d, want 500", p, code)
		}
		if strings.Contains(body, "secret") || strings.Contains(body, "disk I/O") {
			t.Errorf("GET %s shows the internal error:\n%s", p, body)
		}
		if !strings.Contains(body, "reference") {
			t.Errorf("GET %s does not give the log reference:\n%s", p, body)
		}
	}
	if !strings.Contains(f.log.String(), secret) {
		t.Errorf("the log does not hold the internal error:\n%s", f.log.String())
	}
}

func TestNew_RefusesBadOptions(t *testing.T) {
	t.Parallel()
	q, r := openStores(t)
	for name, o := range map[string]Options{
		"protect without token": {ProtectReads: true},
		"short token":           {Token: "short"},
		"spaced token":          {Token: " " + testToken},
		"page size":             {Token: testToken, PageSize: 1001},
	} {
		if _, err := New(q, r, o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: New() error = %v, want ErrOptions", name, err)
		}
	}
	if _, err := New(nil, r, Options{}); !errors.Is(err, ErrOptions) {
		t.Errorf("New(nil queue) error = %v, want ErrOptions", err)
	}
}

// Under FairRotation the flows list and the flow page show each flow's
// weight, and the audit page says in words what a weight change did; under
// min_served (the seeded stores) the weight column is not there.
func TestPages_ShowWeightsUnderRotation(t *testing.T) {
	forEachBackend(t, pagesShowWeightsUnderRotation)
}

func pagesShowWeightsUnderRotation(t *testing.T, b backend) {
	t.Parallel()
	ctx := context.Background()
	q, r := b.open(t)
	p := queuestore.DefaultPolicy()
	p.Fairness = queuestore.FairRotation
	if err := q.SetPolicy(ctx, p, "weighted tenants", 1); err != nil {
		t.Fatal(err)
	}
	for i, ev := range []queuestore.Event{
		{ID: "g-1", Flow: "gold", Body: []byte(`{"delta":1}`), Weight: 4},
		{ID: "s-1", Flow: "silver", Body: []byte(`{"delta":1}`)},
		{ID: "s-2", Flow: "silverware", Body: []byte(`{"delta":1}`), Weight: 2},
	} {
		if _, err := q.Enqueue(ctx, ev, clock.Tick(2+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.SetWeight(ctx, "silver", 3, "silver upgraded (ticket OPS-77)", 9); err != nil {
		t.Fatal(err)
	}
	f := serve(t, q, r, Options{})
	c := f.client(t)
	_, body := f.get(t, c, "/flows")
	mustContain(t, "/flows", body, `<th class="num">weight</th>`)
	for flow, w := range map[string]string{"gold": "4", "silver": "3", "silverware": "2"} {
		row := regexp.MustCompile(`(?s)>` + flow + `</a></td>\s*<td class="num">\d+</td>\s*<td class="num">(\d+)</td>`).FindStringSubmatch(body)
		if row == nil || row[1] != w {
			t.Errorf("/flows: weight of %s = %v, want %s", flow, row, w)
		}
	}
	_, body = f.get(t, c, "/flow?name=silver")
	mustContain(t, "/flow?name=silver", body, "<th>weight</th><td>3 ")
	_, body = f.get(t, c, "/audit")
	mustContain(t, "/audit", body, "weight of flow &#34;silver&#34; 1 → 3", "OPS-77", "fairness min_served → rotation")

	seeded := newFixtureOn(t, b, Options{})
	_, body = seeded.get(t, seeded.client(t), "/flows")
	if strings.Contains(body, ">weight<") {
		t.Errorf("/flows under min_served shows a weight column")
	}
	_, body = seeded.get(t, seeded.client(t), "/flow?name="+url.QueryEscape("acme/orders"))
	if strings.Contains(body, "<th>weight</th>") {
		t.Errorf("/flow under min_served shows a weight")
	}
}

// The flow page lists the head when retention has pruned the flow's first
// events: a list longer than the page starts just before the head, found
// by its place in the list, not by its seq.
func TestFlow_ListsTheHeadAfterAPrune(t *testing.T) {
	forEachBackend(t, flowListsTheHeadAfterAPrune)
}

func flowListsTheHeadAfterAPrune(t *testing.T, b backend) {
	t.Parallel()
	ctx := context.Background()
	q, r := b.open(t)
	p := queue.DefaultPolicy()
	p.Retention = 1
	if err := q.SetPolicy(ctx, p, "keep one tick", 1); err != nil {
		t.Fatal(err)
	}
	const pruned, kept = 20, maxFlowEvents + 10
	var es []queue.Event
	for i := range pruned + kept {
		es = append(es, queue.Event{ID: fmt.Sprintf("big-%03d", i), Flow: "big", Body: []byte("x")})
	}
	if _, err := q.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	for range pruned {
		c, ok, err := q.Claim(ctx, 2)
		if err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if _, err := q.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := q.(queue.Pruner).Prune(ctx, 10, queue.MaxPruneBatch); err != nil || res.Events != pruned {
		t.Fatalf("Prune = %+v, %v; want %d events", res, err, pruned)
	}
	f := serve(t, q, r, Options{})
	code, body := f.get(t, f.client(t), "/flow?name=big")
	head := fmt.Sprintf("big-%03d", pruned)
	if code != http.StatusOK || !strings.Contains(body, ">"+head+"<") {
		t.Fatalf("GET /flow?name=big = %d, the head %s not listed", code, head)
	}
}

// stopsPartway is a queue whose RedriveAll stops as one refused part way
// does: it redrives, then answers what it redrove with ErrTimeRegression,
// as when a later chunk (or shard) meets a tick below its mark.
type stopsPartway struct{ testQueue }

func (s stopsPartway) RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error) {
	done, err := s.testQueue.RedriveAll(ctx, f, reason, now)
	if err != nil {
		return done, err
	}
	return done, fmt.Errorf("redrive all: a later chunk: %w", queue.ErrTimeRegression)
}

// A bulk redrive refused part way says how many it redrove, never that
// nothing was.
func TestRedriveAll_StoppedPartwaySaysWhatWasDone(t *testing.T) {
	t.Parallel()
	seeded := newFixture(t, Options{Token: testToken})
	want := quarantined(t, seeded.q, queue.RedriveFilter{})
	f := serve(t, stopsPartway{seeded.q}, seeded.r, Options{Token: testToken})
	c := f.client(t)
	resp, body := f.post(t, c, "/redrive-all", url.Values{"flow": {""}, "filter_reason": {""},
		"reason": {"fixed"}, "token": {testToken}, "csrf": {f.csrf(t, c)}}, nil)
	if resp.StatusCode != http.StatusConflict || strings.Contains(body, "Nothing was redriven") {
		t.Fatalf("POST /redrive-all stopped part way = %d\n%s", resp.StatusCode, body)
	}
	mustContain(t, "refusal", body, fmt.Sprintf("%d events had been redriven", len(want)))
}

// A notice of a write (paused, resumed, redriven) is shown only when the
// state or the audit agrees: a link someone sends cannot make a page claim
// a write that did not happen.
func TestNotices_OnlyForWritesThatHappened(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	seedDestinations(t, f.q)
	c := f.client(t)
	evs, err := f.q.FlowEvents(context.Background(), pauseFlow)
	if err != nil || len(evs) == 0 {
		t.Fatalf("FlowEvents(%s) = %d, %v", pauseFlow, len(evs), err)
	}
	for _, path := range []string{
		"/flow?name=" + url.QueryEscape(pauseFlow) + "&done=paused",
		"/event?id=" + url.QueryEscape(evs[0].ID) + "&redriven=" + fmtInt(evs[0].Generation),
		"/destination?name=crm&done=paused",
	} {
		code, body := f.get(t, c, path)
		if code != http.StatusOK || strings.Contains(body, `id="result"`) {
			t.Errorf("GET %s = %d, with a notice of a write that did not happen", path, code)
		}
	}
}
