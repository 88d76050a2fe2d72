package console

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Names that a link must carry byte for byte: every character that means
// something in a URL (/ : space # % ? & = +) and some that are not ASCII.
var (
	oddFlows = []string{"acme/orders:eu west#1", "100%?x=1&y=2+3", "zürich/日本 ü"}
	// oddEvents[i] are the two events of oddFlows[i], head first.
	oddEvents = [][2]string{
		{"evt/1:a b#c", "evt/2:a b#c"},
		{"100%?&=+ e1", "100%?&=+ e2"},
		{"é/ü:#1", "é/ü:#2"},
	}
	// oddReason is the failure reason of the first flow's head; the others
	// fail with "unavailable".
	oddReason = "http/503: a#b %"
)

// seedOddNames enqueues two events in each of oddFlows and quarantines each
// head (three failed attempts under the default policy); the first flow's
// head is redriven once and fails again, so the audit names it too.
func seedOddNames(t testing.TB, q queue.Store) {
	t.Helper()
	ctx := context.Background()
	var es []queue.Event
	for i, f := range oddFlows {
		for _, id := range oddEvents[i] {
			es = append(es, queue.Event{ID: id, Flow: f, Body: []byte(`{"delta": 1}`)})
		}
	}
	if _, err := q.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	now := clock.Tick(1)
	fail := func() {
		for range 3 {
			cs, err := q.ClaimBatch(ctx, now, len(oddFlows))
			if err != nil {
				t.Fatalf("ClaimBatch() error = %v", err)
			}
			var items []queue.SettleItem
			for _, c := range cs {
				reason := "unavailable"
				if c.Flow == oddFlows[0] {
					reason = oddReason
				}
				items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation,
					Result: queue.Result{Reason: reason, Error: "refused: " + c.EventID}})
			}
			if _, err := q.SettleBatch(ctx, items, now); err != nil {
				t.Fatalf("SettleBatch() error = %v", err)
			}
			now += 10
		}
	}
	fail()
	e, err := q.Event(ctx, oddEvents[0][0])
	if err != nil || e.State != queue.StateQuarantined {
		t.Fatalf("the seed's head %q is %+v, %v; want it quarantined", oddEvents[0][0], e, err)
	}
	if err := q.Redrive(ctx, e.ID, e.Generation, "first try", now); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	fail()
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

// links returns the console's own links on a page, as a browser reads the
// href attributes (entities decoded), without their fragments.
func links(body string) []string {
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		h := html.UnescapeString(m[1])
		h, _, _ = strings.Cut(h, "#")
		if strings.HasPrefix(h, "/") && !strings.HasPrefix(h, "//") && !strings.HasPrefix(h, "/static/") {
			out = append(out, h)
		}
	}
	return out
}

// Every link the console draws works for names with characters that mean
// something in a URL: a crawl from the overview follows each one (the
// pagers too, one row a page, so that their cursors carry the names) and
// every page answers 200; each flow and event is reached and shows its own
// name.
func TestLinks_OddNamesClickThrough(t *testing.T) {
	forEachBackend(t, linksOddNamesClickThrough)
}

func linksOddNamesClickThrough(t *testing.T, b backend) {
	t.Parallel()
	q, r := b.open(t)
	seedOddNames(t, q)
	f := serve(t, q, r, Options{Token: testToken, PageSize: 1})
	c := f.client(t)
	seen := map[string]bool{}
	todo := []string{"/", "/flows", "/quarantined", "/audit"}
	titles := map[string]bool{} // the <h1> of every page
	h1 := regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if len(seen) > 2000 {
			t.Fatalf("the crawl does not end (%d pages)", len(seen))
		}
		code, body := f.get(t, c, p)
		if code != http.StatusOK {
			t.Errorf("GET %s (a link the console drew) = %d\n%s", p, code, errorText(body))
			continue
		}
		if m := h1.FindStringSubmatch(body); m != nil {
			titles[html.UnescapeString(m[1])] = true
		}
		todo = append(todo, links(body)...)
	}
	for i, fl := range oddFlows {
		if !titles["Flow <code>"+fl+"</code>"] {
			t.Errorf("no link led to the page of flow %q", fl)
		}
		for _, id := range oddEvents[i] {
			if !titles["Event <code>"+id+"</code>"] {
				t.Errorf("no link led to the page of event %q", id)
			}
		}
	}
	if !seen["/quarantined?reason="+url.QueryEscape(oddReason)] && !seen["/quarantined?reason="+strings.ReplaceAll(url.QueryEscape(oddReason), "+", "%20")] {
		t.Errorf("no link led to the quarantined events of reason %q", oddReason)
	}
}

// errorText is the message of an error page, or the page.
func errorText(body string) string {
	if _, rest, ok := strings.Cut(body, `id="error">`); ok {
		msg, _, _ := strings.Cut(rest, "<")
		return html.UnescapeString(msg)
	}
	return body
}

// The same in a browser: an operator clicks from the flows list (through
// its pager) to each flow, to its head, back to the flow from the event,
// from the quarantined list to the event's form, redrives it, and follows
// the audit row's link; every page answers 200 and shows the name.
func TestBrowser_OddNamesClickThrough(t *testing.T) {
	forEachBackend(t, browserOddNamesClickThrough)
}

func browserOddNamesClickThrough(t *testing.T, b backend) {
	ctx := startBrowser(t)
	q, r := b.open(t)
	seedOddNames(t, q)
	f := serve(t, q, r, Options{Token: testToken, PageSize: 1})
	mark, err := q.ClockMark(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// click follows the link of main whose text is exactly text (sel
	// narrows the search) and checks that its page answers 200 with the
	// title want.
	click := func(sel, text, want string) {
		t.Helper()
		js := `[...document.querySelectorAll(` + strconv.Quote(sel) + `)].find(a => a.textContent === ` + strconv.Quote(text) + `)`
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.JSPath(js)))
		if err != nil {
			t.Fatalf("click %q: %v", text, err)
		}
		title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
		if err != nil {
			t.Fatalf("read the title after %q: %v", text, err)
		}
		if resp.Status != http.StatusOK || title != want {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("click %q: %s answered %d %q, want 200 %q\n%s", text, loc, resp.Status, title, want, mainText(t, ctx))
		}
	}
	for i, fl := range oddFlows {
		open(t, ctx, f.srv.URL, "/flows")
		// Page through the flows (one a page) until the flow shows.
		for range len(oddFlows) {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll("table.flows a")].some(a => a.textContent === `+strconv.Quote(fl)+`)`))
			if err != nil {
				t.Fatal(err)
			}
			if n {
				break
			}
			click("a[rel=next]", "next ›", "Flows clock mark "+strconv.FormatInt(int64(mark), 10))
		}
		click("table.flows a", fl, "Flow "+fl)
		head := oddEvents[i][0]
		click("table.events a", head, "Event "+head)
		click("table.kv a", fl, "Flow "+fl)
		click("table.events a", oddEvents[i][1], "Event "+oddEvents[i][1])
	}
	// From the quarantined list, one a page, to the redrive form of the
	// first flow's head.
	head := oddEvents[0][0]
	open(t, ctx, f.srv.URL, "/quarantined?flow="+url.QueryEscape(oddFlows[0]))
	click("table.quarantined a", oddFlows[0], "Flow "+oddFlows[0])
	open(t, ctx, f.srv.URL, "/")
	click("main a", oddReason, "Quarantined 1 matching")
	click("table.quarantined a", head, "Event "+head)
	resp, err := chromedp.RunResponse(ctx,
		typeInto(t, `#redrive input[name=reason]`, "fixed: a/b #1"),
		typeInto(t, `#redrive input[name=token]`, testToken),
		chromedp.Click(chromedp.CSS(`#redrive button`)),
	)
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("redrive %q through the form: %v, %v", head, resp, err)
	}
	if text := mainText(t, ctx); !strings.Contains(text, "Redriven: generation") {
		t.Fatalf("after the redrive of %q the page says:\n%s", head, text)
	}
	open(t, ctx, f.srv.URL, "/audit")
	click("table.audit a", head, "Event "+head)
}
