// Command screenshots seeds a realistic queue and receiver (several
// tenants, events quarantined for different reasons, a redrive in the audit,
// receiver totals and a conflict), serves the console over them on a
// loopback port, drives Debian's headless Chromium through every page, and
// saves a PNG of each under the output folder (docs/console by default).
// One event is redriven through the form on the way, so the result page is
// real too.
//
//	go run ./console/cmd/screenshots [-out docs/console]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/console"
	"github.com/fairrelay/fairrelay/console/internal/browser"
	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

func main() {
	out := flag.String("out", filepath.Join("docs", "console"), "folder the PNG files are written to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
		os.Exit(1)
	}
}

// token is the demo console's operator token (a throwaway: the console
// lives for the run of this program only).
const token = "screenshot-demo-token-0123456789"

func run(out string) (err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "fairrelay-screenshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, q.Close()) }()
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"), receiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	if _, err := demo.Seed(ctx, q, r); err != nil {
		return err
	}
	h, err := console.New(q, r, console.Options{Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	bctx, cancel, err := browser.Start(ctx, filepath.Join(dir, "profile"), 1280, 900)
	if err != nil {
		return err
	}
	defer cancel()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	shot := func(name, path string) error {
		if err := chromedp.Do(bctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return save(bctx, out, name)
	}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"flows", "/flows?sort=backlog"},
		{"flow", "/flow?name=" + url.QueryEscape("acme/refunds")},
		{"quarantined", "/quarantined"},
		{"receiver", "/receiver"},
	}
	for _, p := range pages {
		if err := shot(p.name, p.path); err != nil {
			return err
		}
	}
	// Redrive the head of globex/chat-19 through the form: the event page
	// before, and the result with its audit row after.
	qs, err := q.QuarantinedPage(ctx, queuestore.QuarantinedQuery{Filter: queuestore.RedriveFilter{Flow: "globex/chat-19"}})
	if err != nil || len(qs.Events) == 0 {
		return fmt.Errorf("no quarantined event in globex/chat-19 to redrive (%v)", err)
	}
	id := qs.Events[0].EventID
	if err := shot("event", "/event?id="+url.QueryEscape(id)); err != nil {
		return err
	}
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS(`#redrive input[name=reason]`), "receiver back up after the network fix (OPS-1190)"),
		chromedp.SendKeys(chromedp.CSS(`#redrive input[name=token]`), token),
		chromedp.Click(chromedp.CSS(`#redrive button`)),
		chromedp.WaitVisible(chromedp.CSS(`#result`)),
	); err != nil {
		return fmt.Errorf("redrive through the form: %w", err)
	}
	if err := save(bctx, out, "redriven"); err != nil {
		return err
	}
	// Redrive every event quarantined for unsupported_delta at once.
	if err := shot("quarantined-filtered", "/quarantined?reason=unsupported_delta"); err != nil {
		return err
	}
	if err := chromedp.Do(bctx,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			// Answer the page's confirmation as the operator would.
			_, err := chromedp.Evaluate[bool](`window.confirm = () => true; true`)(ctx, t)
			return err
		}),
		chromedp.SendKeys(chromedp.CSS(`#redrive-all input[name=reason]`), "receiver MaxDelta raised to 1000 (OPS-1191)"),
		chromedp.Click(chromedp.CSS(`#redrive-all button`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit-written`)),
	); err != nil {
		return fmt.Errorf("redrive all through the form: %w", err)
	}
	if err := save(bctx, out, "redriven-all"); err != nil {
		return err
	}
	if err := shot("audit", "/audit"); err != nil {
		return err
	}
	return nil
}

// save writes a full-page PNG of the current page to out/name.png.
func save(ctx context.Context, out, name string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", name, err)
	}
	path := filepath.Join(out, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", path)
	return nil
}
