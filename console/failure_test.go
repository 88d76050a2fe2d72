package console

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Error texts are the receiver's and the network's words: user data, shown
// escaped, never as markup.
var failureErrors = []string{
	`dial tcp 203.0.113.7:443: connect: connection refused`,
	`<script>alert("x")</script> & 'quotes'`,
	`422 Unprocessable Entity: <b>delta</b> 900 is beyond 500 ` + strings.Repeat("é", 200),
}

// seedFailures fails e1 (flow f1) three times with the texts of
// failureErrors, the last time as unsupported_delta, which quarantines it;
// e2 (flow f2) fails once, permanently, without an error text.
func seedFailures(t testing.TB, q queue.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := q.EnqueueBatch(ctx, []queue.Event{
		{ID: "e1", Flow: "f1", Body: []byte(`{"delta": 900}`)},
		{ID: "e2", Flow: "f2", Body: []byte(`{"delta": 1.5}`)},
	}, 0); err != nil {
		t.Fatal(err)
	}
	for i, now := range []clock.Tick{1, 11, 21} {
		c, ok, err := q.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", now, ok, err)
		}
		res := queue.Result{Reason: "unavailable", Error: failureErrors[i]}
		if c.EventID == "e2" {
			res = queue.Result{Reason: "invalid_body", Permanent: true}
		} else if i == 2 {
			res.Reason = "unsupported_delta"
		}
		if _, err := q.Settle(ctx, c.EventID, c.Generation, res, now); err != nil {
			t.Fatal(err)
		}
		if c.EventID == "e2" {
			// e1 waits out its backoff: take its claim at the same tick.
			c, ok, err = q.Claim(ctx, now)
			if err != nil || !ok || c.EventID != "e1" {
				t.Fatalf("Claim(%d) = %+v, %v, %v; want e1", now, c, ok, err)
			}
			if _, err := q.Settle(ctx, c.EventID, c.Generation, queue.Result{Reason: "unavailable", Error: failureErrors[i]}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e, err := q.Event(ctx, "e1"); err != nil || e.State != queue.StateQuarantined {
		t.Fatalf("seed: e1 = %+v, %v; want it quarantined", e, err)
	}
}

// historyRows returns the cells of the rows of the event page's attempt
// history, as text.
func historyRows(t *testing.T, body string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(body, `<table class="history">`)
	if !ok {
		return nil
	}
	table, _, _ = strings.Cut(table, "</table>")
	tag := regexp.MustCompile(`<[^>]*>`)
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(table, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, html.UnescapeString(tag.ReplaceAllString(td[1], "")))
		}
		if cells != nil {
			rows = append(rows, cells)
		}
	}
	return rows
}

// The event page shows the error text of the current failure and the
// attempt history (tick, generation, attempt, outcome, reason, error); a
// redrive clears the error and keeps the history. The quarantined list
// and the flow page show the error text; every text is escaped.
func TestPages_ShowFailureDetail(t *testing.T) {
	forEachBackend(t, pagesShowFailureDetail)
}

func pagesShowFailureDetail(t *testing.T, b backend) {
	t.Parallel()
	q, r := b.open(t)
	seedFailures(t, q)
	f := serve(t, q, r, Options{Token: testToken})
	c := f.client(t)
	ctx := context.Background()
	e1, err := q.Event(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if len(e1.History) != 3 {
		t.Fatalf("the store kept %d attempts of e1, want 3: %+v", len(e1.History), e1.History)
	}
	// Nothing of a text is ever markup.
	noMarkup := func(where, body string) {
		t.Helper()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>delta") {
			t.Errorf("%s shows an error text as markup", where)
		}
	}
	escaped := html.EscapeString(failureErrors[2])

	code, body := f.get(t, c, "/event?id=e1")
	if code != http.StatusOK {
		t.Fatalf("GET /event?id=e1 = %d", code)
	}
	noMarkup("/event", body)
	mustContain(t, "/event", body, `<code class="error" id="error-text">`+escaped+`</code>`, "unsupported_delta")
	rows := historyRows(t, body)
	want := [][]string{
		{"1", fmtInt(e1.History[0].Generation), "1", "retry_scheduled", "unavailable", failureErrors[0]},
		{"11", fmtInt(e1.History[1].Generation), "2", "retry_scheduled", "unavailable", failureErrors[1]},
		{"21", fmtInt(e1.History[2].Generation), "3", "quarantined", "unsupported_delta", failureErrors[2]},
	}
	if len(rows) != len(want) {
		t.Fatalf("/event?id=e1 history has %d rows, want %d:\n%q", len(rows), len(want), rows)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("/event?id=e1 history row %d = %q, want %q", i+1, rows[i], want[i])
		}
	}

	// A permanent failure: one attempt, quarantined, no error text.
	_, body = f.get(t, c, "/event?id=e2")
	if rows := historyRows(t, body); len(rows) != 1 || rows[0][3] != "quarantined" || rows[0][4] != "invalid_body" || rows[0][5] != "–" {
		t.Errorf("/event?id=e2 history = %q, want one quarantined invalid_body row without error", rows)
	}
	mustContain(t, "/event?id=e2", body, "<tr><th>error</th><td>–</td></tr>")

	// The quarantined list: each event's error text, escaped, the long one
	// cut with the whole text in its title.
	_, body = f.get(t, c, "/quarantined")
	noMarkup("/quarantined", body)
	mustContain(t, "/quarantined", body, html.EscapeString(cut(failureErrors[2], 160)), `title="`+escaped+`"`, "invalid_body")
	_, body = f.get(t, c, "/flow?name=f1")
	noMarkup("/flow", body)
	mustContain(t, "/flow", body, "unsupported_delta: <code class=\"error\">"+escaped+"</code>")

	// A redrive clears the current error and keeps the history.
	if err := q.Redrive(ctx, "e1", e1.Generation, "receiver limit raised", 30); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, c, "/event?id=e1")
	if strings.Contains(body, `id="error-text"`) {
		t.Errorf("after the redrive the event page still shows an error text")
	}
	if rows := historyRows(t, body); len(rows) != 3 {
		t.Errorf("after the redrive the history has %d rows, want the 3 kept", len(rows))
	}
	// An event that never failed says so.
	if _, err := q.Enqueue(ctx, queue.Event{ID: "e3", Flow: "f3", Body: []byte(`{"delta": 1}`)}, 30); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, c, "/event?id=e3")
	mustContain(t, "/event?id=e3", body, "None: this event has never failed.")
}

// The overview shows a policy's retry schedule and retry-after cap, and the
// audit says in words how a policy change moved them.
func TestPages_ShowTheRetrySchedule(t *testing.T) {
	forEachBackend(t, pagesShowTheRetrySchedule)
}

func pagesShowTheRetrySchedule(t *testing.T, b backend) {
	t.Parallel()
	q, r := b.open(t)
	ctx := context.Background()
	p := queue.DefaultPolicy().WithSchedule(5, 30, 120)
	p.RetryAfterCap = 60
	if err := q.SetPolicy(ctx, p, "ride out outages", 1); err != nil {
		t.Fatal(err)
	}
	f := serve(t, q, r, Options{})
	c := f.client(t)
	_, body := f.get(t, c, "/")
	mustContain(t, "/", body, "<th>retry schedule</th><td>5 ticks, 30 ticks, 120 ticks</td>", "<th>retry-after cap</th><td>60 ticks</td>", "<th>attempts per round</th><td>4</td>")
	_, body = f.get(t, c, "/audit")
	mustContain(t, "/audit", body, "max attempts 3 → 4, schedule none → 5,30,120, retry-after cap 0 → 60")
	// Without a schedule: the formula, and the cap it falls back to.
	if err := q.SetPolicy(ctx, queue.DefaultPolicy(), "back to the formula", 2); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, c, "/")
	mustContain(t, "/", body, "<th>backoff</th><td>2 ticks doubling to 8 ticks</td>", "<th>retry-after cap</th><td>8 ticks (the longest wait)</td>")
}
