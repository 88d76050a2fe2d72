package console

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/console/internal/browser"
	"github.com/fairrelay/fairrelay/queuestore"
)

// Browser tests: Debian's headless Chromium, driven by chromedp, against
// the real handler on a loopback port over real seeded stores. Without a
// browser they skip, unless FAIRRELAY_REQUIRE_BROWSER=1 (CI) makes that a
// failure.

// startBrowser starts a fresh headless Chromium for t and returns a
// chromedp context with a deadline for the test's actions.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := browser.Path(); err != nil {
		if os.Getenv("FAIRRELAY_REQUIRE_BROWSER") == "1" {
			t.Fatalf("browser test: %v (FAIRRELAY_REQUIRE_BROWSER=1)", err)
		}
		t.Skipf("browser test skipped: no chromium at %s (apt-get install chromium; FAIRRELAY_REQUIRE_BROWSER=1 makes this a failure)", browser.DefaultPath)
	}
	ctx, cancel, err := browser.Start(context.Background(), filepath.Join(t.TempDir(), "profile"), 1280, 900)
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(cancel)
	tctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelT)
	return tctx
}

// typeInto types text into the empty input field sel, key by key as a user
// would, and makes sure the field then holds text. On a machine loaded by
// other test runs the browser has lost a field's focus part way through the
// keys (a redrive was submitted with the reason "receiv"); the keys that
// arrived are then a beginning of text, and the field is given the whole
// text (with a log line): these tests check what the console does with a
// form, not the browser's keyboard. Anything else in the field (text that
// was there before) is an error.
func typeInto(tb testing.TB, sel, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.SendKeys(chromedp.CSS(sel), text)(ctx, t); err != nil {
			return chromedp.Void{}, err
		}
		got, err := chromedp.Value(chromedp.CSS(sel))(ctx, t)
		switch {
		case err != nil:
			return chromedp.Void{}, err
		case got == text:
			return chromedp.Void{}, nil
		case !strings.HasPrefix(text, got):
			return chromedp.Void{}, fmt.Errorf("%s holds %q after typing %q into it", sel, got, text)
		}
		tb.Logf("the browser took %q of the keys %q typed into %s; setting the field's value", got, text, sel)
		return chromedp.SetValue(chromedp.CSS(sel), text)(ctx, t)
	}
}

// open navigates to path and returns the text of the page's main element.
func open(t *testing.T, ctx context.Context, base, path string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return mainText(t, ctx)
}

func mainText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return s
}

func TestBrowser_EveryPageRenders(t *testing.T) {
	forEachBackend(t, browserEveryPageRenders)
}

func browserEveryPageRenders(t *testing.T, b backend) {
	ctx := startBrowser(t)
	f := newFixtureOn(t, b, Options{Token: testToken})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{})[0]
	for _, tc := range []struct {
		path, want string
		svg        bool
	}{
		{"/", "Quarantined by reason", true},
		{"/flows", "acme/orders", false},
		{"/flows?sort=blocked", "quarantined", false},
		{"/flow?name=" + url.QueryEscape(stuck.Flow), stuck.EventID, false},
		{"/event?id=" + url.QueryEscape(stuck.EventID), stuck.Reason, false},
		{"/quarantined", stuck.EventID, false},
		{"/audit", "OPS-1182", false},
		{"/receiver", "acme-orders-001", false},
	} {
		text := open(t, ctx, f.srv.URL, tc.path)
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s: page does not show %q:\n%s", tc.path, tc.want, text)
		}
		if tc.svg {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("figure.chart svg rect").length`))
			if err != nil || n < 5 {
				t.Errorf("%s: %d chart bars drawn (%v), want the charts", tc.path, n, err)
			}
		}
	}
	// The stylesheet and the script loaded (same origin, under the CSP).
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).backgroundColor`))
	if err != nil || bg != "rgb(29, 35, 48)" {
		t.Errorf("header background = %q (%v): the stylesheet did not load", bg, err)
	}
}

func TestBrowser_RedriveThroughTheFormShowsTheAuditRow(t *testing.T) {
	forEachBackend(t, browserRedriveThroughTheFormShowsTheAuditRow)
}

func browserRedriveThroughTheFormShowsTheAuditRow(t *testing.T, b backend) {
	ctx := startBrowser(t)
	f := newFixtureOn(t, b, Options{Token: testToken})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{Flow: "globex/chat-19"})[0]
	open(t, ctx, f.srv.URL, "/quarantined?reason=unavailable")
	// From the quarantined list to the event's form.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a.button[href*="`+url.QueryEscape(stuck.EventID)+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#redrive`)),
		typeInto(t, `#redrive input[name=reason]`, "receiver back up (OPS-1190)"),
		typeInto(t, `#redrive input[name=token]`, testToken),
		chromedp.Click(chromedp.CSS(`#redrive button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("redrive through the form: %v", err)
	}
	text := mainText(t, ctx)
	for _, want := range []string{"Redriven: generation", "receiver back up (OPS-1190)", "pending"} {
		if !strings.Contains(text, want) {
			t.Errorf("result page does not show %q:\n%s", want, text)
		}
	}
	text = open(t, ctx, f.srv.URL, "/audit")
	if !strings.Contains(text, stuck.EventID) || !strings.Contains(text, "receiver back up (OPS-1190)") {
		t.Errorf("the audit page does not show the redrive:\n%s", text)
	}
	e, err := f.q.Event(context.Background(), stuck.EventID)
	if err != nil || e.State != "pending" || e.Generation != stuck.Generation+1 {
		t.Errorf("event after the form = %+v, %v; want pending at generation %d", e, err, stuck.Generation+1)
	}
	// The token was remembered for the tab: the next form has it filled in.
	other := quarantined(t, f.q, queuestore.RedriveFilter{Flow: "umbrella/alerts"})[0]
	open(t, ctx, f.srv.URL, "/event?id="+url.QueryEscape(other.EventID))
	v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#redrive input[name=token]`)))
	if err != nil || v != testToken {
		t.Errorf("token field on the next form = %q (%v), want it remembered", v, err)
	}
}

func TestBrowser_RedriveAllThroughTheForm(t *testing.T) {
	ctx := startBrowser(t)
	f := newFixture(t, Options{Token: testToken})
	want := quarantined(t, f.q, queuestore.RedriveFilter{Reason: "unsupported_delta"})
	open(t, ctx, f.srv.URL, "/quarantined?reason=unsupported_delta")
	if err := chromedp.Do(ctx,
		// Answer the script's confirmation as an operator would.
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.confirm = () => true; true`)(ctx, t)
			return err
		}),
		typeInto(t, `#redrive-all input[name=reason]`, "MaxDelta raised to 1000"),
		typeInto(t, `#redrive-all input[name=token]`, testToken),
		chromedp.Click(chromedp.CSS(`#redrive-all button`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-written`)),
	); err != nil {
		t.Fatalf("redrive all through the form: %v", err)
	}
	text := mainText(t, ctx)
	for _, e := range want {
		if !strings.Contains(text, e.EventID) {
			t.Errorf("result page does not list %s:\n%s", e.EventID, text)
		}
	}
	if n := strings.Count(text, "MaxDelta raised to 1000"); n < len(want) {
		t.Errorf("result page shows the reason %d times, want it on %d audit rows", n, len(want))
	}
	if left := quarantined(t, f.q, queuestore.RedriveFilter{Reason: "unsupported_delta"}); len(left) != 0 {
		t.Errorf("%d events still match after the bulk redrive", len(left))
	}
}

func TestBrowser_WriteWithoutTheTokenIsRefused(t *testing.T) {
	ctx := startBrowser(t)
	f := newFixture(t, Options{Token: testToken})
	stuck := quarantined(t, f.q, queuestore.RedriveFilter{})[0]
	before, err := f.q.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ token, want string }{
		{"", "Token required"},
		{"not-the-token-at-all", "Wrong token"},
	} {
		open(t, ctx, f.srv.URL, "/event?id="+url.QueryEscape(stuck.EventID))
		// The field is required in the form; a hand-made request has no
		// such guard, so take it off and send what was typed.
		if err := chromedp.Do(ctx,
			chromedp.RemoveAttribute(chromedp.CSS(`#redrive input[name=token]`), "required"),
			typeInto(t, `#redrive input[name=reason]`, "should not happen"),
			chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := chromedp.Evaluate[bool](`document.querySelector("#redrive input[name=token]").value = `+strconv.Quote(tc.token)+`; true`)(ctx, t)
				return err
			}),
			chromedp.Click(chromedp.CSS(`#redrive button`)),
			chromedp.WaitVisible(chromedp.CSS(`#error`)),
		); err != nil {
			t.Fatalf("token %q: submit: %v", tc.token, err)
		}
		if text := mainText(t, ctx); !strings.Contains(text, tc.want) {
			t.Errorf("token %q: page says %q, want %q", tc.token, text, tc.want)
		}
	}
	// A form posted from another site: the browser marks it cross-site.
	evil := fmt.Sprintf(`<form id="x" method="post" action="%s/redrive"><input name="id" value="%s"><input name="generation" value="%d"><input name="reason" value="csrf"><input name="token" value="%s"></form>`,
		f.srv.URL, stuck.EventID, stuck.Generation, testToken)
	if err := chromedp.Do(ctx,
		chromedp.Navigate("data:text/html,"+url.PathEscape(evil)),
		chromedp.Submit(chromedp.CSS(`#x`)),
		chromedp.WaitVisible(chromedp.CSS(`#error`)),
	); err != nil {
		t.Fatalf("cross-site form: %v", err)
	}
	if text := mainText(t, ctx); !strings.Contains(text, "Cross-site") && !strings.Contains(text, "Form expired") {
		t.Errorf("cross-site form: page says %q, want a refusal", text)
	}
	after, err := f.q.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Audit) != len(before.Audit) {
		t.Errorf("a refused write added audit rows")
	}
	e, err := f.q.Event(context.Background(), stuck.EventID)
	if err != nil || e.State != "quarantined" || e.Generation != stuck.Generation {
		t.Errorf("after the refusals the event is %+v, %v; want it untouched", e, err)
	}
}
