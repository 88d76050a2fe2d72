package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/queue"
)

// The flow the pause tests pause: a seeded flow with acked events.
const pauseFlow = "acme/orders"

// pauser is the test queue as a queue.Pauser (both backends are one).
func pauser(t testing.TB, q testQueue) queue.Pauser {
	t.Helper()
	p, ok := q.(queue.Pauser)
	if !ok {
		t.Fatalf("%T is not a queue.Pauser", q)
	}
	return p
}

func TestPause_RefusalsChangeNothing(t *testing.T) {
	forEachBackend(t, pauseRefusalsChangeNothing)
}

func pauseRefusalsChangeNothing(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	good := func(csrf string) url.Values {
		return url.Values{"flow": {pauseFlow}, "reason": {"investigating"}, "token": {testToken}, "csrf": {csrf}}
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
	// The checks every write passes, exactly as a redrive's.
	auth := []writeCase{
		{name: "no token", form: without("token"), code: 403, wants: "Token required"},
		{name: "wrong token", form: with("token", testToken+"x"), code: 403, wants: "Wrong token"},
		{name: "no csrf field", form: without("csrf"), code: 403, wants: "Form expired"},
		{name: "no csrf cookie", form: with("csrf", strings.Repeat("a", 64)), noCookie: true, code: 403, wants: "Form expired"},
		{name: "cross-site", form: good, header: http.Header{"Sec-Fetch-Site": {"cross-site"}}, code: 403, wants: "Cross-site"},
		{name: "no flow", form: without("flow"), code: 400, wants: "flow"},
		{name: "no reason", form: without("reason"), code: 400, wants: "A reason is required"},
		{name: "control in reason", form: with("reason", "a\x00b"), code: 400, wants: "printable"},
		{name: "unknown flow", form: with("flow", "no/such-flow"), code: 404, wants: "No such flow"},
	}
	checkRefusals(t, f, "/pause", auth)
	checkRefusals(t, f, "/resume", append(auth[:0:0], writeCase{name: "not paused", form: good, code: 409, wants: "Not paused"}))
	if err := pauser(t, f.q).PauseFlow(context.Background(), pauseFlow, "seeded pause", 1<<40); err != nil {
		t.Fatal(err)
	}
	checkRefusals(t, f, "/pause", []writeCase{{name: "already paused", form: good, code: 409, wants: "Already paused"}})
	checkRefusals(t, f, "/resume", auth)
	for _, p := range []string{"/pause", "/resume"} {
		if code, _ := f.get(t, f.client(t), p); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s = %d, want 405", p, code)
		}
	}
}

func TestPause_ShownOnThePages(t *testing.T) {
	forEachBackend(t, pauseShownOnThePages)
}

func pauseShownOnThePages(t *testing.T, b backend) {
	t.Parallel()
	f := newFixtureOn(t, b, Options{Token: testToken})
	c := f.client(t)
	_, body := f.get(t, c, "/flow?name="+url.QueryEscape(pauseFlow))
	mustContain(t, "running flow page", body, `action="/pause"`, "running")
	if err := pauser(t, f.q).PauseFlow(context.Background(), pauseFlow, "tenant investigating double charges", 1<<40); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, c, "/flow?name="+url.QueryEscape(pauseFlow))
	mustContain(t, "paused flow page", body, `action="/resume"`, `<span class="state paused">paused</span>: <span id="pause-reason">tenant investigating double charges</span>`)
	_, body = f.get(t, c, "/flows")
	mustContain(t, "flows page", body, `<span class="state paused" title="tenant investigating double charges">paused</span>`)
	_, body = f.get(t, c, "/")
	mustContain(t, "overview", body, "paused flows")
	_, body = f.get(t, c, "/audit")
	mustContain(t, "audit page", body, "pause of flow &#34;acme/orders&#34;", "tenant investigating double charges")
	// A read-only console shows the state, and no form.
	ro := serve(t, f.q, nil, Options{})
	_, body = ro.get(t, ro.client(t), "/flow?name="+url.QueryEscape(pauseFlow))
	mustContain(t, "read-only flow page", body, "paused", "relayctl flows resume")
	if strings.Contains(body, `action="/resume"`) {
		t.Errorf("a read-only console shows the resume form")
	}
}

func TestBrowser_PauseAndResumeThroughTheForm(t *testing.T) {
	forEachBackend(t, browserPauseAndResume)
}

func browserPauseAndResume(t *testing.T, b backend) {
	ctx := startBrowser(t)
	f := newFixtureOn(t, b, Options{Token: testToken})
	open(t, ctx, f.srv.URL, "/flow?name="+url.QueryEscape(pauseFlow))
	if err := chromedp.Do(ctx,
		typeInto(t, `#pause input[name=reason]`, "tenant investigating (OPS-2001)"),
		typeInto(t, `#pause input[name=token]`, testToken),
		chromedp.Click(chromedp.CSS(`#pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("pause through the form: %v", err)
	}
	text := mainText(t, ctx)
	for _, want := range []string{"Paused: no claim picks this flow", "tenant investigating (OPS-2001)", "Resume acme/orders"} {
		if !strings.Contains(text, want) {
			t.Errorf("page after the pause does not show %q:\n%s", want, text)
		}
	}
	if st := flowState(t, f.q, pauseFlow); !st.Paused || st.PauseReason != "tenant investigating (OPS-2001)" {
		t.Fatalf("flow after the pause form = %+v, want paused with the reason", st)
	}
	// The flow's page again (without the result: #result is awaited
	// below); the token is remembered for the tab, the resume form shown.
	open(t, ctx, f.srv.URL, "/flow?name="+url.QueryEscape(pauseFlow))
	if err := chromedp.Do(ctx,
		typeInto(t, `#pause input[name=reason]`, "double charges were upstream"),
		chromedp.Click(chromedp.CSS(`#pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("resume through the form: %v", err)
	}
	text = mainText(t, ctx)
	if !strings.Contains(text, "Resumed: its head can be claimed again") || !strings.Contains(text, "Pause acme/orders") {
		t.Errorf("page after the resume:\n%s", text)
	}
	if st := flowState(t, f.q, pauseFlow); st.Paused {
		t.Fatalf("flow after the resume form = %+v, want it running", st)
	}
	text = open(t, ctx, f.srv.URL, "/audit")
	for _, want := range []string{`pause of flow "acme/orders"`, "tenant investigating (OPS-2001)", `resume of flow "acme/orders"`, "double charges were upstream"} {
		if !strings.Contains(text, want) {
			t.Errorf("the audit page does not show %q:\n%s", want, text)
		}
	}
}

// flowState reads one flow's row through the pager.
func flowState(t testing.TB, q testQueue, name string) queue.FlowState {
	t.Helper()
	p, err := q.FlowsPage(context.Background(), queue.FlowQuery{Prefix: name, Sort: queue.SortByFlow, Limit: 1})
	if err != nil || len(p.Flows) == 0 || p.Flows[0].Flow != name {
		t.Fatalf("read flow %s: %+v, %v", name, p, err)
	}
	return p.Flows[0]
}
