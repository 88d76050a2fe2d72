package browser_test

import (
	"context"
	"fmt"
	"os"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/console/internal/browser"
)

// Start a headless Chromium and read a page's title. (No Output line: the
// example needs Debian's chromium, which a machine may not have.)
func ExampleStart() {
	dir, _ := os.MkdirTemp("", "browser-example-")
	defer os.RemoveAll(dir)
	ctx, cancel, err := browser.Start(context.Background(), dir, 800, 600)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("data:text/html,<title>hello</title>")); err != nil {
		fmt.Println(err)
		return
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	fmt.Println(title, err)
}
