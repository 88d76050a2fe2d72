// Package browser starts the headless Chromium the console's browser tests
// and screenshots drive through chromedp: Debian's chromium, a fresh profile,
// no sandbox (the tests run as root), no background networking, so the
// browser talks to nothing but the console under test.
package browser

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// DefaultPath is where Debian's chromium package puts the browser.
const DefaultPath = "/usr/bin/chromium"

// ErrNoBrowser reports that no Chromium binary was found.
var ErrNoBrowser = errors.New("browser: no chromium (apt-get install chromium, or set CHROMIUM to its path)")

// Path returns the browser to run: $CHROMIUM, else DefaultPath, else
// chromium on the PATH; ErrNoBrowser when there is none.
func Path() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", ErrNoBrowser
}

// Start launches the browser with a fresh profile in profileDir and returns
// a chromedp context for one tab; cancel closes the browser.
func Start(ctx context.Context, profileDir string, width, height int) (context.Context, context.CancelFunc, error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profileDir),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tctx, cancelTab := chromedp.NewContext(actx)
	// Start the browser now, so that a launch failure is reported here.
	if err := chromedp.Do(tctx); err != nil {
		cancelTab()
		cancelAlloc()
		return nil, nil, err
	}
	return tctx, func() { cancelTab(); cancelAlloc() }, nil
}
