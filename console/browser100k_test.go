//go:build !race

package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairrelay/fairrelay/queue"
)

// This file is left out of -race builds: under the race detector SQLite
// runs several times slower, so seeding 100,000 flows takes many minutes
// and the page times it reports mean nothing. browser100k_race_test.go says
// so in the test's place; CI runs this test without -race.

// seedFlows enqueues n flows (every tenth with three events) in batches.
func seedFlows(t testing.TB, q queue.Store, n int) {
	t.Helper()
	const batch = 10000
	var es []queue.Event
	flush := func() {
		if _, err := q.EnqueueBatch(context.Background(), es, 0); err != nil {
			t.Fatalf("EnqueueBatch() error = %v", err)
		}
		es = es[:0]
	}
	for i := range n {
		flow := fmt.Sprintf("tenant-%03d/flow-%06d", i%500, i)
		k := 1
		if i%10 == 0 {
			k = 3
		}
		for j := range k {
			es = append(es, queue.Event{ID: fmt.Sprintf("%s#%d", flow, j), Flow: flow, Body: []byte(`{"delta": 1}`)})
		}
		if len(es) >= batch {
			flush()
		}
	}
	if len(es) > 0 {
		flush()
	}
}

// Paging through 100,000 flows in the browser: pages at the start, in the
// middle (a keyset cursor) and at the end, by name and by backlog. The
// median time of a page (navigation until the table is shown) is reported,
// never asserted.
func TestBrowser_PagesThrough100000Flows(t *testing.T) {
	forEachBackend(t, browserPagesThrough100000Flows)
}

func browserPagesThrough100000Flows(t *testing.T, b backend) {
	if testing.Short() {
		t.Skip("seeds 100,000 flows; not in -short")
	}
	q, r := b.open(t)
	start := time.Now()
	seedFlows(t, q, 100000)
	t.Logf("seeded 100,000 flows in %v", time.Since(start).Round(time.Millisecond))
	// The browser (and the deadline of its actions) starts after the seed,
	// which takes minutes under the race detector.
	ctx := startBrowser(t)
	f := serve(t, q, r, Options{})
	var times []time.Duration
	var paths []string
	visit := func(path string) string {
		paths = append(paths, path)
		t0 := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(f.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("table.flows"))); err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		times = append(times, time.Since(t0))
		return mainText(t, ctx)
	}
	next := func() string {
		t0 := time.Now()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[rel=next]`)), chromedp.WaitVisible(chromedp.CSS("table.flows"))); err != nil {
			t.Fatalf("click next: %v", err)
		}
		times = append(times, time.Since(t0))
		return mainText(t, ctx)
	}
	for _, sort := range []string{"flow", "backlog"} {
		text := visit("/flows?sort=" + sort)
		if !strings.Contains(text, "flow-000000") && sort == "flow" {
			t.Errorf("sort %s: first page:\n%.400s", sort, text)
		}
		for range 3 {
			next()
		}
		// The middle: a keyset cursor in the order, as the pager makes one.
		cursor := "0:tenant-250/flow-050250"
		if sort == "backlog" {
			cursor = "-3:tenant-250/flow-050250"
		}
		text = visit("/flows?sort=" + sort + "&after=" + url.QueryEscape(cursor))
		if sort == "flow" && !strings.Contains(text, "tenant-250/flow-050750") {
			t.Errorf("sort flow: the page after tenant-250/flow-050250 does not hold tenant-250/flow-050750:\n%.400s", text)
		}
		for range 2 {
			next()
		}
		text = visit("/flows?sort=" + sort + "&last=1")
		if sort == "flow" && !strings.Contains(text, "tenant-499/flow-099999") {
			t.Errorf("sort flow: last page does not hold the last flow:\n%.400s", text)
		}
		t0 := time.Now()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[rel=prev]`)), chromedp.WaitVisible(chromedp.CSS("table.flows"))); err != nil {
			t.Fatalf("click previous: %v", err)
		}
		times = append(times, time.Since(t0))
	}
	// A prefix search among 100,000.
	text := visit("/flows?q=" + url.QueryEscape("tenant-123/"))
	if !strings.Contains(text, "tenant-123/flow-000123") || strings.Contains(text, "tenant-124/") {
		t.Errorf("search tenant-123/: page:\n%.400s", text)
	}
	report := func(what string, ds []time.Duration) {
		sorted := slices.Clone(ds)
		slices.Sort(sorted)
		t.Logf("100,000 flows, %s: %d loads, median %v, fastest %v, slowest %v", what,
			len(sorted), sorted[len(sorted)/2].Round(time.Microsecond), sorted[0].Round(time.Microsecond), sorted[len(sorted)-1].Round(time.Microsecond))
	}
	report("browser (navigation until the table is shown)", times)
	// The same pages fetched without the browser: the server's part.
	var server []time.Duration
	for _, p := range paths {
		for range 3 {
			t0 := time.Now()
			resp, err := http.Get(f.srv.URL + p)
			if err != nil {
				t.Fatalf("GET %s: %v", p, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s = %d", p, resp.StatusCode)
			}
			server = append(server, time.Since(t0))
		}
	}
	report("server (HTTP GET of the page)", server)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the browser test ran out of time")
	}
}
