package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/console/internal/browser"
	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/queue"
)

// screenshotsEnv names the folder TestScreenshots writes its PNG files to;
// `go tool mage console:screenshots` sets it to docs/console.
const screenshotsEnv = "FAIRRELAY_SCREENSHOTS"

// screenshotToken is the demo console's operator token (a throwaway: the
// console lives for the test only).
const screenshotToken = "screenshot-demo-token-0123456789"

// TestScreenshots seeds a realistic queue and receiver (several tenants,
// events quarantined for different reasons with their error texts and
// attempt histories, a redrive in the audit,
// receiver totals and a conflict), serves the console over them, drives
// Debian's headless Chromium through every page and saves a PNG of each in
// the folder $FAIRRELAY_SCREENSHOTS. One event is redriven and one flow
// paused through the forms on the way, so the result pages are real too. Without the variable it
// skips: it writes files, it asserts only that every page renders.
func TestScreenshots(t *testing.T) {
	out := os.Getenv(screenshotsEnv)
	if out == "" {
		t.Skip("set " + screenshotsEnv + "=DIR to write the console's screenshots (go tool mage console:screenshots)")
	}
	ctx := context.Background()
	q, r := openSQLite(t)
	if _, err := demo.Seed(ctx, q, r); err != nil {
		t.Fatal(err)
	}
	h, err := New(q, r, Options{Token: screenshotToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base := srv.URL
	bctx, cancel, err := browser.Start(ctx, filepath.Join(t.TempDir(), "profile"), 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(name, path string) error {
		if err := chromedp.Do(bctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return saveScreenshot(bctx, out, name)
	}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"flows", "/flows?sort=backlog"},
		{"flow", "/flow?name=" + url.QueryEscape("acme/refunds")},
		// Its head: failed, redriven, failed again; the attempt history
		// spans both rounds.
		{"event-history", pageLink("/event", "id", "acme-refunds-001")},
		{"quarantined", "/quarantined"},
		{"receiver", "/receiver"},
	}
	for _, p := range pages {
		if err := shot(p.name, p.path); err != nil {
			t.Fatal(err)
		}
	}
	// Redrive the head of globex/chat-19 through the form: the event page
	// before, and the result with its audit row after.
	qs, err := q.QuarantinedPage(ctx, queue.QuarantinedQuery{Filter: queue.RedriveFilter{Flow: "globex/chat-19"}})
	if err != nil || len(qs.Events) == 0 {
		t.Fatalf("no quarantined event in globex/chat-19 to redrive (%v)", err)
	}
	id := qs.Events[0].EventID
	if err := shot("event", "/event?id="+url.QueryEscape(id)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		typeInto(t, `#redrive input[name=reason]`, "receiver back up after the network fix (OPS-1190)"),
		typeInto(t, `#redrive input[name=token]`, screenshotToken),
		chromedp.Click(chromedp.CSS(`#redrive button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("redrive through the form: %v", err)
	}
	if err := saveScreenshot(bctx, out, "redriven"); err != nil {
		t.Fatal(err)
	}
	// Redrive every event quarantined for unsupported_delta at once.
	if err := shot("quarantined-filtered", "/quarantined?reason=unsupported_delta"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			// Answer the page's confirmation as the operator would.
			_, err := chromedp.Evaluate[bool](`window.confirm = () => true; true`)(ctx, t)
			return err
		}),
		typeInto(t, `#redrive-all input[name=reason]`, "receiver MaxDelta raised to 1000 (OPS-1191)"),
		chromedp.Click(chromedp.CSS(`#redrive-all button`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-written`)),
	); err != nil {
		t.Fatalf("redrive all through the form: %v", err)
	}
	if err := saveScreenshot(bctx, out, "redriven-all"); err != nil {
		t.Fatal(err)
	}
	// Pause a tenant's flow through its page's form (docs/contract.md §7.9):
	// the flow page after, with its state and the resume form.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/flow?name="+url.QueryEscape("acme/orders")),
		chromedp.WaitVisible(chromedp.CSS(`#pause`)),
		typeInto(t, `#pause input[name=reason]`, "tenant acme investigating double charges (OPS-1203)"),
		chromedp.Click(chromedp.CSS(`#pause button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		t.Fatalf("pause through the form: %v", err)
	}
	if err := saveScreenshot(bctx, out, "flow-paused"); err != nil {
		t.Fatal(err)
	}
	if err := shot("audit", "/audit"); err != nil {
		t.Fatal(err)
	}
	screenshotDestinations(t, out) // destinations_test.go
}

// saveScreenshot writes a full-page PNG of the current page to out/name.png.
func saveScreenshot(ctx context.Context, out, name string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(out, name+".png"), png, 0o644)
}
