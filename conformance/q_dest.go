package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The clauses of docs/contract.md §7.11: destinations (queue.DestinationStore).
// A flow's destination is fixed by its first event; a claim may leave out
// destinations (the caller's Exclude and Room, a pause, a concurrency or a
// rate limit) and then picks exactly what the same claim picks on a store
// where the left-out flows do not exist; a left-out flow keeps its place.

// dests is s as a queue.DestinationStore; the clause is skipped when the
// backend has none.
func dests(t *testing.T, s Queue) queue.DestinationStore {
	return capability[queue.DestinationStore](t, s, "destinations")
}

// destSecret is the secret every test destination gets: no snapshot or
// audit row may ever show it.
const destSecret = "s3cret-never-shown-9f2c"

// testDest is a valid destination named name with the given limits.
func testDest(name string, concurrency, rate int) queue.Destination {
	return queue.Destination{Name: name, URL: "http://127.0.0.1:9/" + name, Secrets: []string{destSecret, destSecret + "-" + name},
		Concurrency: concurrency, Rate: rate}
}

// putDest registers d; it fails t on an error.
func putDest(t testing.TB, ds queue.DestinationStore, d queue.Destination, now clock.Tick) {
	t.Helper()
	if err := ds.PutDestination(context.Background(), d, "register "+d.Name, now); err != nil {
		t.Fatalf("PutDestination(%s) error = %v", d.Name, err)
	}
}

// enqueueTo enqueues one event of flow to dest; it fails t on an error.
func enqueueTo(t testing.TB, s Queue, id, flow, dest string, weight int, now clock.Tick) {
	t.Helper()
	e := queue.Event{ID: id, Flow: flow, Body: []byte("x"), Destination: dest, Weight: weight}
	if _, err := s.Enqueue(context.Background(), e, now); err != nil {
		t.Fatalf("Enqueue(%q, %q, destination %q) error = %v", id, flow, dest, err)
	}
}

// claimFor is ds.ClaimFor; it fails t on an error.
func claimFor(t testing.TB, ds queue.DestinationStore, now clock.Tick, n int, f queue.ClaimFilter) []queue.Claim {
	t.Helper()
	cs, err := ds.ClaimFor(context.Background(), now, n, f)
	if err != nil {
		t.Fatalf("ClaimFor(%d, %d, %+v) error = %v", now, n, f, err)
	}
	return cs
}

// claimedFlows is the flows of cs, in order.
func claimedFlows(cs []queue.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Flow
	}
	return out
}

// ackAll acks every claim of cs at now.
func ackAll(t testing.TB, s Queue, cs []queue.Claim, now clock.Tick) {
	t.Helper()
	for _, c := range cs {
		if o := settle(t, s, c.EventID, c.Generation, success, now); o != queue.Acked {
			t.Fatalf("Settle(%s) = %q, want acked", c.EventID, o)
		}
	}
}

// auditOf is the audit rows of kind k.
func auditOf(t testing.TB, s Queue, k queue.AuditKind) []queue.AuditRecord {
	t.Helper()
	all, err := s.AuditAll(context.Background())
	if err != nil {
		t.Fatalf("AuditAll() error = %v", err)
	}
	var out []queue.AuditRecord
	for _, a := range all {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

// A flow's destination is named by its first event: a later event with ""
// keeps it, one naming it again is fine, one naming another is
// ErrDestinationMismatch and an unregistered name ErrUnknownDestination
// (a batch holding one is refused whole); each refusal changes nothing. The
// destination is not part of an event's identity: a duplicate naming
// another destination is a duplicate. Claims carry the flow's destination.
func queueDest_7_11_FixedAtFirstEvent(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 0, 0), 1)
	putDest(t, ds, testDest("beta", 0, 0), 1)
	enqueueTo(t, s, "a1", "fa", "alpha", 0, 2)
	enqueueTo(t, s, "a2", "fa", "", 0, 2)
	enqueueTo(t, s, "a3", "fa", "alpha", 0, 2)
	enqueueTo(t, s, "d1", "fd", "", 0, 2)
	before := snap(t, s)
	for name, es := range map[string][]queue.Event{
		"another destination":           {{ID: "a4", Flow: "fa", Body: []byte("x"), Destination: "beta"}},
		"an unknown destination":        {{ID: "n1", Flow: "fn", Body: []byte("x"), Destination: "gamma"}},
		"a named one on a default flow": {{ID: "d2", Flow: "fd", Body: []byte("x"), Destination: "alpha"}},
		"a batch with one mismatch": {{ID: "b1", Flow: "fb", Body: []byte("x"), Destination: "beta"},
			{ID: "a4", Flow: "fa", Body: []byte("x"), Destination: "beta"}},
		"a batch with one unknown": {{ID: "b1", Flow: "fb", Body: []byte("x"), Destination: "beta"},
			{ID: "n1", Flow: "fn", Body: []byte("x"), Destination: "gamma"}},
		"a batch whose second event contradicts its first": {{ID: "c1", Flow: "fc", Body: []byte("x"), Destination: "beta"},
			{ID: "c2", Flow: "fc", Body: []byte("x"), Destination: "alpha"}},
	} {
		want := queue.ErrDestinationMismatch
		if strings.Contains(name, "unknown") {
			want = queue.ErrUnknownDestination
		}
		if len(es) == 1 {
			_, err := s.Enqueue(ctx, es[0], 3)
			wantErr(t, "Enqueue("+name+")", err, want)
		}
		_, err := s.EnqueueBatch(ctx, es, 3)
		wantErr(t, "EnqueueBatch("+name+")", err, want)
		assertUnchanged(t, "an enqueue of "+name, before, snap(t, s))
	}
	_, err := s.Enqueue(ctx, queue.Event{ID: "bad", Flow: "fx", Body: []byte("x"), Destination: "Not A Name"}, 3)
	wantErr(t, "Enqueue(invalid destination name)", err, queue.ErrInvalid)
	assertUnchanged(t, "an enqueue with an invalid destination", before, snap(t, s))

	r, err := s.Enqueue(ctx, queue.Event{ID: "a1", Flow: "fa", Body: []byte("x"), Destination: "beta"}, 4)
	if err != nil || !r.Duplicate || r.Seq != 1 {
		t.Fatalf("Enqueue(a1 again, naming beta) = %+v, %v; want a duplicate of seq 1", r, err)
	}
	if f := flowOf(t, s, "fa"); f.Destination != "alpha" {
		t.Fatalf("Snapshot flow fa = %s, want destination alpha", jsonOf(f))
	}
	if f := flowOf(t, s, "fd"); f.Destination != "" {
		t.Fatalf("Snapshot flow fd = %s, want the default destination", jsonOf(f))
	}
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	for _, f := range fs {
		if want := map[string]string{"fa": "alpha", "fd": ""}[f.Flow]; f.Destination != want {
			t.Fatalf("Flows() row %s, want destination %q", jsonOf(f), want)
		}
	}
	got := map[string]string{}
	for _, c := range claimFor(t, ds, 5, 10, queue.ClaimFilter{}) {
		got[c.Flow] = c.Destination
	}
	if want := map[string]string{"fa": "alpha", "fd": ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ClaimFor destinations = %v, want %v", got, want)
	}
}

// PutDestination checks its input (ErrInvalid, ErrEmptyReason) and changes
// nothing on a refusal; a change keeps a pause; every change writes an
// AuditDestination row whose detail shows the old and new settings with the
// secrets as a count. Destinations lists them by name with their secrets
// and state; Stats and Snapshot count and show them.
func queueDest_7_11_PutDestinationChecksAndAudits(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("beta", 2, 0), 1)
	putDest(t, ds, testDest("alpha", 0, 5), 1)
	before := snap(t, s)
	bad := map[string]queue.Destination{
		"empty name":      {Name: "", URL: "http://x/", Secrets: []string{"k"}},
		"upper-case name": {Name: "Alpha", URL: "http://x/", Secrets: []string{"k"}},
		"no secret":       {Name: "alpha", URL: "http://x/"},
		"relative URL":    {Name: "alpha", URL: "/x", Secrets: []string{"k"}},
		"negative rate":   {Name: "alpha", URL: "http://x/", Secrets: []string{"k"}, Rate: -1},
		"huge concurrency": {Name: "alpha", URL: "http://x/", Secrets: []string{"k"},
			Concurrency: queue.MaxDestinationConcurrency + 1},
	}
	for name, d := range bad {
		err := ds.PutDestination(ctx, d, "bad", 2)
		wantErr(t, "PutDestination("+name+")", err, queue.ErrInvalid)
	}
	wantErr(t, "PutDestination(empty reason)", ds.PutDestination(ctx, testDest("gamma", 0, 0), "", 2), queue.ErrEmptyReason)
	wantErr(t, "PauseDestination(unknown)", ds.PauseDestination(ctx, "gamma", "down", 2), queue.ErrUnknownDestination)
	wantErr(t, "ResumeDestination(unknown)", ds.ResumeDestination(ctx, "gamma", "up", 2), queue.ErrUnknownDestination)
	assertUnchanged(t, "refused destination changes", before, snap(t, s))

	if err := ds.PauseDestination(ctx, "beta", "receiver beta down", 3); err != nil {
		t.Fatalf("PauseDestination(beta) error = %v", err)
	}
	changed := testDest("beta", 7, 9)
	changed.URL = "https://beta.example/hook"
	changed.Secrets = []string{"only-one"}
	if err := ds.PutDestination(ctx, changed, "new url", 4); err != nil {
		t.Fatalf("PutDestination(beta changed) error = %v", err)
	}
	list, err := ds.Destinations(ctx)
	if err != nil {
		t.Fatalf("Destinations() error = %v", err)
	}
	if len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "beta" {
		t.Fatalf("Destinations() = %s, want alpha then beta", jsonOf(list))
	}
	b := list[1]
	if b.URL != changed.URL || !slices.Equal(b.Secrets, changed.Secrets) || b.SecretCount != 1 || b.Concurrency != 7 || b.Rate != 9 ||
		!b.Paused || b.PauseReason != "receiver beta down" {
		t.Fatalf("Destinations() beta = %+v, want the new settings, still paused", b)
	}
	if !slices.Equal(list[0].Secrets, testDest("alpha", 0, 0).Secrets) {
		t.Fatalf("Destinations() alpha secrets = %q, want them as registered", list[0].Secrets)
	}
	rows := auditOf(t, s, queue.AuditDestination)
	if len(rows) != 3 {
		t.Fatalf("destination audit rows = %s, want 3", jsonOf(rows))
	}
	var c queue.DestinationChange
	if err := json.Unmarshal([]byte(rows[2].Detail), &c); err != nil {
		t.Fatalf("audit detail %q: %v", rows[2].Detail, err)
	}
	wantOld := queue.SnapshotDestination{Name: "beta", URL: testDest("beta", 0, 0).URL, Secrets: 2, Concurrency: 2, Paused: "receiver beta down"}
	wantNew := queue.SnapshotDestination{Name: "beta", URL: changed.URL, Secrets: 1, Concurrency: 7, Rate: 9, Paused: "receiver beta down"}
	if c.Name != "beta" || c.Old == nil || *c.Old != wantOld || c.New != wantNew || rows[2].Reason != "new url" || rows[2].At != 4 {
		t.Fatalf("audit row %s, detail %+v; want old %+v new %+v", jsonOf(rows[2]), c, wantOld, wantNew)
	}
	var reg queue.DestinationChange
	if err := json.Unmarshal([]byte(rows[0].Detail), &reg); err != nil || reg.Old != nil || reg.New.Name != "beta" {
		t.Fatalf("registration audit detail %q (%v): want no old settings", rows[0].Detail, err)
	}
	sn := snap(t, s)
	if want := []queue.SnapshotDestination{{Name: "alpha", URL: testDest("alpha", 0, 0).URL, Secrets: 2, Rate: 5}, wantNew}; !reflect.DeepEqual(sn.Destinations, want) {
		t.Fatalf("Snapshot destinations = %s, want %s", jsonOf(sn.Destinations), jsonOf(want))
	}
	if st, err := s.Stats(ctx); err != nil || st.Destinations != 2 {
		t.Fatalf("Stats() = %+v, %v; want 2 destinations", st, err)
	}
}

// Secrets are returned by Destinations only: never in a Snapshot, an audit
// row (AuditAll, AuditPage), Flows or Stats.
func queueDest_7_11_SecretsNeverShown(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 1, 1), 1)
	d := testDest("alpha", 2, 2)
	d.Secrets = append(d.Secrets, destSecret+"-rotated")
	putDest(t, ds, d, 2)
	if err := ds.PauseDestination(ctx, "alpha", "down", 3); err != nil {
		t.Fatalf("PauseDestination() error = %v", err)
	}
	enqueueTo(t, s, "a1", "fa", "alpha", 0, 3)
	if err := ds.SetFlowDestination(ctx, "fa", "", "back to default", 4); err != nil {
		t.Fatalf("SetFlowDestination() error = %v", err)
	}
	all, err := s.AuditAll(ctx)
	if err != nil {
		t.Fatalf("AuditAll() error = %v", err)
	}
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats() error = %v", err)
	}
	shown := map[string]any{"Snapshot": snap(t, s), "AuditAll": all, "Flows": fs, "Stats": st}
	if pg, ok := s.(queue.Pager); ok {
		page, err := pg.AuditPage(ctx, queue.AuditQuery{})
		if err != nil {
			t.Fatalf("AuditPage() error = %v", err)
		}
		shown["AuditPage"] = page
	}
	for what, v := range shown {
		if b, _ := json.Marshal(v); strings.Contains(string(b), destSecret) {
			t.Fatalf("%s shows a secret: %s", what, b)
		}
		if b := fmt.Sprintf("%+v", v); strings.Contains(b, destSecret) {
			t.Fatalf("%s shows a secret when printed: %s", what, b)
		}
	}
	if len(auditOf(t, s, queue.AuditDestination)) != 2 || len(auditOf(t, s, queue.AuditDestinationPause)) != 1 {
		t.Fatalf("AuditAll() = %s, want 2 destination rows and 1 pause row", jsonOf(all))
	}
}

// With no destination registered a store is as before: no destination in
// its Snapshot or Stats (the JSON has no such key), and ClaimFor with an
// empty filter claims exactly what ClaimBatch claims on a twin store.
// Excluding DefaultDestination leaves every flow out and changes only the
// clock mark.
func queueDest_7_11_NoDestinationsAsBefore(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, twin := bk.open(t), bk.open(t)
	ds := dests(t, s)
	for _, q := range []Queue{s, twin} {
		for i := range 4 {
			enqueue(t, q, fmt.Sprintf("e%d", i), fmt.Sprintf("f%d", i%3), "x", 1)
		}
	}
	before := snap(t, s)
	if cs := claimFor(t, ds, 2, 5, queue.ClaimFilter{Exclude: []string{queue.DefaultDestination}}); len(cs) != 0 {
		t.Fatalf("ClaimFor(exclude the default) = %s, want nothing", jsonOf(cs))
	}
	if cs := claimFor(t, ds, 2, 5, queue.ClaimFilter{Room: map[string]int{"": 0}}); len(cs) != 0 {
		t.Fatalf("ClaimFor(no room for the default) = %s, want nothing", jsonOf(cs))
	}
	assertOnlyMark(t, "a claim leaving out every flow", before, snap(t, s), 2)
	for now := clock.Tick(3); now < 8; now++ {
		got := claimFor(t, ds, now, 2, queue.ClaimFilter{})
		want, err := twin.ClaimBatch(ctx, now, 2)
		if err != nil {
			t.Fatalf("ClaimBatch() error = %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ClaimFor(%d, empty filter) = %s, want ClaimBatch's %s", now, jsonOf(got), jsonOf(want))
		}
		ackAll(t, s, got, now)
		ackAll(t, twin, want, now)
	}
	sn := snap(t, s)
	if b, _ := json.Marshal(sn); sn.Destinations != nil || strings.Contains(string(b), `"destination`) {
		t.Fatalf("Snapshot() without destinations = %s, want no destination key", b)
	}
	st, err := s.Stats(ctx)
	if b, _ := json.Marshal(st); err != nil || st.Destinations != 0 || strings.Contains(string(b), "destination") {
		t.Fatalf("Stats() without destinations = %s, %v; want no destinations key", b, err)
	}
	if list, err := ds.Destinations(ctx); err != nil || len(list) != 0 {
		t.Fatalf("Destinations() = %v, %v; want none", list, err)
	}
}

// RegisteredDestinations lists the registered destinations by name with
// their settings and secrets, exactly as Destinations shows them (a pause
// and a change included), none when none is registered; it is a read and
// changes nothing.
func queueDest_7_11_RegisteredDestinationsAreTheSettings(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	if list, err := ds.RegisteredDestinations(ctx); err != nil || len(list) != 0 {
		t.Fatalf("RegisteredDestinations() = %v, %v; want none", list, err)
	}
	putDest(t, ds, testDest("beta", 2, 0), 1)
	putDest(t, ds, testDest("alpha", 0, 5), 1)
	if err := ds.PauseDestination(ctx, "beta", "receiver beta down", 2); err != nil {
		t.Fatalf("PauseDestination(beta) error = %v", err)
	}
	changed := testDest("beta", 7, 9)
	changed.URL, changed.Secrets = "https://beta.example/hook", []string{"only-one"}
	putDest(t, ds, changed, 3)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "e1", Flow: "fb", Body: []byte("x"), Destination: "beta"}, 4); err != nil {
		t.Fatalf("Enqueue() error = %v", err)
	}
	before := snap(t, s)
	got, err := ds.RegisteredDestinations(ctx)
	if err != nil {
		t.Fatalf("RegisteredDestinations() error = %v", err)
	}
	assertUnchanged(t, "RegisteredDestinations", before, snap(t, s))
	want := []queue.Destination{testDest("alpha", 0, 5), changed}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RegisteredDestinations() = %s, want %s", jsonOf(got), jsonOf(want))
	}
	full, err := ds.Destinations(ctx)
	if err != nil {
		t.Fatalf("Destinations() error = %v", err)
	}
	for i := range full {
		if i >= len(got) || !reflect.DeepEqual(full[i].Destination, got[i]) {
			t.Fatalf("Destinations() = %s, RegisteredDestinations() = %s; want the same settings", jsonOf(full), jsonOf(got))
		}
	}
}

// ClaimFor's filter is checked: a negative room or an invalid name is
// ErrInvalid and changes nothing (not even the clock mark); names not
// registered are allowed.
func queueDest_7_11_ClaimFilterChecked(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	enqueue(t, s, "e1", "f1", "x", 1)
	before := snap(t, s)
	for name, f := range map[string]queue.ClaimFilter{
		"negative room":         {Room: map[string]int{"alpha": -1}},
		"invalid excluded name": {Exclude: []string{"Bad Name"}},
		"invalid room name":     {Room: map[string]int{"-x": 1}},
	} {
		_, err := ds.ClaimFor(ctx, 2, 1, f)
		wantErr(t, "ClaimFor("+name+")", err, queue.ErrInvalid)
		_, _, err = ds.SettleClaimFor(ctx, nil, 2, 1, f)
		wantErr(t, "SettleClaimFor("+name+")", err, queue.ErrInvalid)
	}
	_, err := ds.ClaimFor(ctx, 2, 0, queue.ClaimFilter{})
	wantErr(t, "ClaimFor(n 0)", err, queue.ErrInvalid)
	assertUnchanged(t, "refused claims", before, snap(t, s))
	if cs := claimFor(t, ds, 2, 1, queue.ClaimFilter{Exclude: []string{"never-registered"}}); len(cs) != 1 {
		t.Fatalf("ClaimFor(exclude an unregistered name) = %s, want the one head", jsonOf(cs))
	}
}

// The exclusion rule (§7.11), under both orders: on a store A whose flows
// deliver to alpha, beta and the default destination, claims that leave out
// one destination's flows (ClaimFor's Exclude, a Room of 0, or a paused
// destination) pick exactly, claim for claim (tickets, generations,
// attempts, leases), what the same claims pick on a twin store B where
// those flows do not exist. The left-out flows keep their served count,
// pass and joined order, and when they are no longer left out they are
// claimed first: they kept their place.
func queueDest_7_11_ExclusionIsTheTwinWithoutThoseFlows(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	for _, fair := range []queue.Fairness{queue.FairMinServed, queue.FairRotation} {
		for _, how := range []string{"exclude beta", "room 0 for beta", "pause beta", "exclude default"} {
			t.Run(string(fair)+"/"+how, func(t *testing.T) {
				t.Parallel()
				if fair == queue.FairRotation && !bk.Rotation {
					t.Skip("the backend does not implement the rotation")
				}
				destExclusionTwin(t, bk, fair, how)
			})
		}
	}
}

func destExclusionTwin(t *testing.T, bk *QueueBackend, fair queue.Fairness, how string) {
	ctx := context.Background()
	p := queue.DefaultPolicy()
	p.Fairness = fair
	a, b := bk.openPolicy(t, p), bk.openPolicy(t, p)
	da, db := dests(t, a), dests(t, b)
	left := "beta"
	var f queue.ClaimFilter
	switch how {
	case "exclude beta":
		f.Exclude = []string{"beta"}
	case "room 0 for beta":
		f.Room = map[string]int{"beta": 0, "alpha": 100}
	case "exclude default":
		left = ""
		f.Exclude = []string{""}
	}
	for _, ds := range []queue.DestinationStore{da, db} {
		putDest(t, ds, testDest("alpha", 0, 0), 1)
		putDest(t, ds, testDest("beta", 0, 0), 1)
	}
	if how == "pause beta" {
		if err := da.PauseDestination(ctx, "beta", "receiver beta down", 1); err != nil {
			t.Fatalf("PauseDestination() error = %v", err)
		}
	}
	destOf := []string{"alpha", "beta", ""}
	flowName := func(i int) string {
		return fmt.Sprintf("f%d-%s", i, map[string]string{"": "default"}[destOf[i%3]]+destOf[i%3])
	}
	// Enqueue events to both stores (the left-out flows to A only),
	// interleaved, some with weights, at ticks 2..; more arrive while
	// claiming.
	add := func(round, i int, now clock.Tick) {
		d := destOf[i%3]
		w := 1 + (i*7+round)%3
		id := fmt.Sprintf("r%d-%d", round, i)
		enqueueTo(t, a, id, flowName(i), d, w, now)
		if d != left {
			enqueueTo(t, b, id, flowName(i), d, w, now)
		}
	}
	for i := range 12 {
		add(0, i, 2)
		if i%2 == 0 {
			add(1, i, 2)
		}
	}
	leftFlows := func(s Queue) []queue.SnapshotFlow {
		var out []queue.SnapshotFlow
		for _, fl := range snap(t, s).Flows {
			if fl.Destination == left {
				fl.Ready, fl.ReadyAt = false, nil // the ready cache may be promoted; not a place
				out = append(out, fl)
			}
		}
		return out
	}
	kept := leftFlows(a)
	now := clock.Tick(3)
	for round := 0; round < 12; round++ {
		n := 1 + round%3
		var got, want []queue.Claim
		var err error
		if round%2 == 0 {
			got = claimFor(t, da, now, n, f)
			want, err = b.ClaimBatch(ctx, now, n)
		} else {
			// SettleClaimFor with nothing to settle, and with a settle
			// (the last claims acked) in the other rounds below.
			_, got, err = da.SettleClaimFor(ctx, nil, now, n, f)
			if err != nil {
				t.Fatalf("SettleClaimFor() error = %v", err)
			}
			_, want, err = capability[queue.SettleClaimer](t, b, "SettleClaimBatch").SettleClaimBatch(ctx, nil, now, n)
		}
		if err != nil {
			t.Fatalf("twin claim error = %v", err)
		}
		for i := range got {
			got[i].Destination = "" // B has no flows of the left-out one; the rest are compared
		}
		for i := range want {
			want[i].Destination = ""
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d at %d: claim with %s = %s\nwant the twin's %s", round, now, how, jsonOf(got), jsonOf(want))
		}
		for i, c := range got {
			o := success
			if (round+i)%4 == 3 {
				o = failure("unavailable")
			}
			settle(t, a, c.EventID, c.Generation, o, now)
			settle(t, b, c.EventID, c.Generation, o, now)
		}
		if round == 5 {
			for i := range 12 {
				if destOf[i%3] != left {
					add(2, i, now)
				}
			}
		}
		now += 2
	}
	if got := leftFlows(a); !reflect.DeepEqual(got, kept) {
		t.Fatalf("left-out flows changed:\nbefore %s\nafter  %s", jsonOf(kept), jsonOf(got))
	}
	// No longer left out, the left-out flows (never served, their pass
	// where it was) come first.
	if how == "pause beta" {
		if err := da.ResumeDestination(ctx, "beta", "receiver beta back", now); err != nil {
			t.Fatalf("ResumeDestination() error = %v", err)
		}
	}
	cs := claimFor(t, da, now, len(kept), queue.ClaimFilter{})
	got := claimedFlows(cs)
	var want []string
	for _, fl := range kept {
		want = append(want, fl.Flow)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("first claims after the exclusion = %v, want the left-out flows %v first", got, want)
	}
}

// The left-out flows' places under Room, concurrency and pause, against
// the model of the fair order: each ClaimFor picks the first heads, in the
// order's key over the flows dispatchable at now, taking at most room(d)
// of destination d, where room(d) is the least of the caller's Room, the
// concurrency limit minus the destination's unexpired leases, and 0 while
// it is paused or excluded. A destination reaching its room drops out for
// the rest of the batch. Concurrency counts only unexpired leases: an
// expired one (a take-over waiting) frees its slot.
func queueDest_7_11_RoomAndConcurrencyFollowTheOrder(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	for _, fair := range []queue.Fairness{queue.FairMinServed, queue.FairRotation} {
		t.Run(string(fair), func(t *testing.T) {
			t.Parallel()
			if fair == queue.FairRotation && !bk.Rotation {
				t.Skip("the backend does not implement the rotation")
			}
			destRoomModel(t, bk, fair)
		})
	}
}

func destRoomModel(t *testing.T, bk *QueueBackend, fair queue.Fairness) {
	ctx := context.Background()
	p := queue.DefaultPolicy()
	p.Fairness = fair
	s := bk.openPolicy(t, p)
	ds := dests(t, s)
	limits := map[string]int{"alpha": 2, "beta": 0, "gamma": 1}
	for _, d := range []string{"alpha", "beta", "gamma"} {
		putDest(t, ds, testDest(d, limits[d], 0), 1)
	}
	destOf := []string{"alpha", "beta", "gamma", ""}
	for round := range 3 {
		for i := range 10 {
			enqueueTo(t, s, fmt.Sprintf("e%d-%d", round, i), fmt.Sprintf("f%02d", i), destOf[i%4], 1+i%3, 2)
		}
	}
	filters := []queue.ClaimFilter{
		{},
		{Room: map[string]int{"alpha": 1, "": 1}},
		{Exclude: []string{"gamma"}, Room: map[string]int{"beta": 2}},
		{Room: map[string]int{"beta": 1, "alpha": 5}},
		{Exclude: []string{""}},
	}
	now := clock.Tick(3)
	var held []queue.Claim // claims not settled: they hold concurrency until their lease expires
	for step := range 14 {
		f := filters[step%len(filters)]
		paused := step%5 == 3
		if paused {
			if err := ds.PauseDestination(ctx, "beta", "beta down", now); err != nil {
				t.Fatalf("PauseDestination() error = %v", err)
			}
		}
		n := 2 + step%4
		sn := snap(t, s)
		flowDest := map[string]string{}
		for _, fl := range sn.Flows {
			flowDest[fl.Flow] = fl.Destination
		}
		room := func(d string) int {
			r := n
			if slices.Contains(f.Exclude, d) || paused && d == "beta" {
				return 0
			}
			if v, ok := f.Room[d]; ok {
				r = min(r, v)
			}
			if lim := limits[d]; lim > 0 {
				in := 0
				for _, e := range sn.Events {
					if e.State == queue.StateInflight && e.LeaseUntil > now && flowDest[e.Flow] == d {
						in++
					}
				}
				r = min(r, max(0, lim-in))
			}
			return r
		}
		want := modelPick(sn, now, n, room)
		got := claimFor(t, ds, now, n, f)
		if !slices.Equal(claimedFlows(got), want) {
			t.Fatalf("step %d at %d: ClaimFor(%d, %+v, beta paused %v) = %v, want %v\nsnapshot %s", step, now, n, f, paused, claimedFlows(got), want, jsonOf(sn))
		}
		for _, c := range got {
			if c.Destination != flowDest[c.Flow] {
				t.Fatalf("claim %s, want destination %q", jsonOf(c), flowDest[c.Flow])
			}
		}
		// Ack some, keep some in flight (their leases expire later), fail
		// the rest.
		for i, c := range got {
			switch (step + i) % 3 {
			case 0:
				settle(t, s, c.EventID, c.Generation, success, now)
			case 1:
				held = append(held, c)
			case 2:
				settle(t, s, c.EventID, c.Generation, failure("unavailable"), now)
			}
		}
		if paused {
			if err := ds.ResumeDestination(ctx, "beta", "beta back", now); err != nil {
				t.Fatalf("ResumeDestination() error = %v", err)
			}
		}
		now += 2
	}
	if len(held) == 0 {
		t.Fatal("no claim was held: the clause tested no concurrency")
	}
}

// modelPick is the fair order restricted to the destinations with room:
// the flows of sn whose head is dispatchable at now, in (served, flow)
// order, or (pass clamped to vnow when it turns ready, joined) under the
// rotation, taking at most room(d) flows of destination d and n in all.
// A used-up take-over (DefaultPolicy's MaxAttempts) is quarantined by the
// claim and takes no room.
func modelPick(sn queue.Snapshot, now clock.Tick, n int, room func(string) int) []string {
	heads := map[string]queue.SnapshotEvent{}
	for _, e := range sn.Events {
		for _, fl := range sn.Flows {
			if fl.Flow == e.Flow && fl.HeadSeq != nil && *fl.HeadSeq == e.Seq {
				heads[e.Flow] = e
			}
		}
	}
	type cand struct {
		flow, dest string
		k1, k2     int64
		name       string
		useName    bool
	}
	var cs []cand
	for _, fl := range sn.Flows {
		h, ok := heads[fl.Flow]
		if !ok || fl.Paused != "" || fl.ReadyAt == nil {
			continue
		}
		if !(h.State == queue.StatePending && h.AvailableAt <= now || h.State == queue.StateInflight && h.LeaseUntil <= now) {
			continue
		}
		if h.State == queue.StateInflight && h.Attempts >= queue.MaxAttempts {
			continue // a used-up take-over: quarantined by the claim, no room taken
		}
		c := cand{flow: fl.Flow, dest: fl.Destination, k1: fl.Served, useName: true}
		if sn.Rotation != nil {
			pass := *fl.Pass
			if !fl.Ready {
				pass = max(pass, sn.Rotation.VNow)
			}
			c.k1, c.k2, c.useName = pass, *fl.Joined, false
		}
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].k1 != cs[j].k1 {
			return cs[i].k1 < cs[j].k1
		}
		if cs[i].useName {
			return cs[i].flow < cs[j].flow
		}
		return cs[i].k2 < cs[j].k2
	})
	taken := map[string]int{}
	var out []string
	for _, c := range cs {
		if len(out) == n {
			break
		}
		if taken[c.dest] < room(c.dest) {
			taken[c.dest]++
			out = append(out, c.flow)
		}
	}
	return out
}

// Concurrency counts the destination's claims whose lease has not expired,
// over every claim: with a limit of 2, a third head waits until one of the
// two is settled or its lease expires; a take-over of an expired claim
// takes the freed slot as any head would.
func queueDest_7_11_ConcurrencyCountsUnexpiredLeases(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 2, 0), 1)
	for i := range 4 {
		enqueueTo(t, s, fmt.Sprintf("a%d", i), fmt.Sprintf("fa%d", i), "alpha", 0, 1)
	}
	enqueue(t, s, "d0", "fd0", "x", 1)
	if got := claimedFlows(claimFor(t, ds, 2, 10, queue.ClaimFilter{})); !slices.Equal(got, []string{"fa0", "fa1", "fd0"}) {
		t.Fatalf("ClaimFor(10) = %v, want two of alpha (its limit) and the default flow", got)
	}
	wantNoClaim(t, s, 3)
	// At 2+Lease both leases expired: two slots are free, and the flows
	// served least take them (fa2, fa3), the take-overs of fa0 and fa1 wait.
	c := claimFor(t, ds, 2+queue.Lease, 10, queue.ClaimFilter{})
	if got := claimedFlows(c); !slices.Equal(got, []string{"fa2", "fa3", "fd0"}) {
		t.Fatalf("claims after the leases expired = %v, want fa2, fa3 (the freed slots) and fd0", got)
	}
	settle(t, s, c[0].EventID, c[0].Generation, success, 2+queue.Lease)
	if got := claimedFlows(claimFor(t, ds, 3+queue.Lease, 10, queue.ClaimFilter{})); !slices.Equal(got, []string{"fa0"}) {
		t.Fatalf("ClaimFor after one settled = %v, want the take-over of fa0 in the freed slot", got)
	}
	list, err := ds.Destinations(context.Background())
	if err != nil || len(list) != 1 || list[0].Inflight != 2 || list[0].Flows != 4 || list[0].Backlog != 3 {
		t.Fatalf("Destinations() = %s, %v; want alpha with 4 flows, backlog 3, 2 in flight", jsonOf(list), err)
	}
}

// The rate limit is a token bucket of Rate tokens (claims per 1000 ticks),
// full at registration; each claim takes one; it refills by Rate tokens
// per 1000 ticks, counted in thousandths, never above Rate.
func queueDest_7_11_RateBucketRefills(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 0, 4), 0)
	for i := range 20 {
		enqueueTo(t, s, fmt.Sprintf("a%d", i), fmt.Sprintf("fa%02d", i), "alpha", 0, 0)
	}
	take := func(now clock.Tick, want int) {
		t.Helper()
		cs := claimFor(t, ds, now, 20, queue.ClaimFilter{})
		if len(cs) != want {
			t.Fatalf("ClaimFor(%d) claimed %d, want %d", now, len(cs), want)
		}
		ackAll(t, s, cs, now)
	}
	take(1, 4)             // a full bucket: 4 tokens
	take(2, 0)             // 1 tick refilled 4 thousandths
	take(250, 0)           // 249 ticks: 996 thousandths
	take(251, 1)           // 250 ticks: one token
	take(252, 0)           // 4 thousandths
	take(5000, 4)          // capped at 4 tokens, never more
	take(5000+125, 0)      // 500 thousandths
	take(5000+250, 1)      // 1000
	take(5000+250+1000, 4) // 4000: full again
	take(5000+250+1001, 0) // 4 thousandths
}

// PauseDestination and ResumeDestination: a pause leaves the destination's
// flows out of every claim (Claim, ClaimBatch, ClaimFor) while enqueues go
// on and other flows are claimed; a claim in flight settles as usual; a
// resume needs no other action. Both write an audit row (DestinationChange
// with the pause reason); a pause of a paused one is ErrDestinationPaused,
// a resume of one not paused ErrDestinationNotPaused, an empty reason
// ErrEmptyReason, and each refusal changes nothing.
func queueDest_7_11_PauseResumeAudited(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 0, 0), 1)
	enqueueTo(t, s, "a1", "fa", "alpha", 0, 1)
	enqueueTo(t, s, "a2", "fa", "alpha", 0, 1)
	enqueue(t, s, "d1", "fd", "x", 1)
	inflight := wantClaim(t, s, "a1", 2)
	before := snap(t, s)
	wantErr(t, "ResumeDestination(not paused)", ds.ResumeDestination(ctx, "alpha", "up", 3), queue.ErrDestinationNotPaused)
	wantErr(t, "PauseDestination(empty reason)", ds.PauseDestination(ctx, "alpha", " ", 3), queue.ErrEmptyReason)
	assertUnchanged(t, "refused pause and resume", before, snap(t, s))
	if err := ds.PauseDestination(ctx, "alpha", "alpha is down", 3); err != nil {
		t.Fatalf("PauseDestination() error = %v", err)
	}
	before = snap(t, s)
	wantErr(t, "PauseDestination(paused)", ds.PauseDestination(ctx, "alpha", "again", 4), queue.ErrDestinationPaused)
	assertUnchanged(t, "a second pause", before, snap(t, s))
	if o := settle(t, s, "a1", inflight.Generation, success, 4); o != queue.Acked {
		t.Fatalf("Settle(in-flight claim of a paused destination) = %q, want acked", o)
	}
	enqueueTo(t, s, "a3", "fa", "alpha", 0, 4)
	wantClaim(t, s, "d1", 5)
	wantNoClaim(t, s, 6)
	if cs, err := s.ClaimBatch(ctx, 6, 5); err != nil || len(cs) != 0 {
		t.Fatalf("ClaimBatch(paused) = %s, %v; want nothing", jsonOf(cs), err)
	}
	list, err := ds.Destinations(ctx)
	if err != nil || len(list) != 1 || !list[0].Paused || list[0].PauseReason != "alpha is down" {
		t.Fatalf("Destinations() = %s, %v; want alpha paused with the reason", jsonOf(list), err)
	}
	if err := ds.ResumeDestination(ctx, "alpha", "alpha is back", 7); err != nil {
		t.Fatalf("ResumeDestination() error = %v", err)
	}
	wantClaim(t, s, "a2", 8)
	pauses, resumes := auditOf(t, s, queue.AuditDestinationPause), auditOf(t, s, queue.AuditDestinationResume)
	if len(pauses) != 1 || len(resumes) != 1 || pauses[0].Reason != "alpha is down" || pauses[0].At != 3 ||
		resumes[0].Reason != "alpha is back" || resumes[0].At != 7 {
		t.Fatalf("pause rows %s, resume rows %s; want one each with reason and tick", jsonOf(pauses), jsonOf(resumes))
	}
	var c queue.DestinationChange
	if err := json.Unmarshal([]byte(pauses[0].Detail), &c); err != nil || c.Old == nil || c.Old.Paused != "" || c.New.Paused != "alpha is down" {
		t.Fatalf("pause detail %q (%v), want old not paused, new paused with the reason", pauses[0].Detail, err)
	}
	c = queue.DestinationChange{}
	if err := json.Unmarshal([]byte(resumes[0].Detail), &c); err != nil || c.Old == nil || c.Old.Paused != "alpha is down" || c.New.Paused != "" {
		t.Fatalf("resume detail %q (%v), want old paused, new not", resumes[0].Detail, err)
	}
	if sn := snap(t, s); len(sn.OperatorAudit) != 3 {
		t.Fatalf("Snapshot operator audit = %s, want the register, pause and resume rows", jsonOf(sn.OperatorAudit))
	}
}

// SetFlowDestination changes a flow's destination from its next claim on,
// with an AuditFlowDestination row (FlowDestinationChange); later events
// naming the new one are accepted, the old one refused. An unknown flow is
// ErrNotFound, an unknown destination ErrUnknownDestination, an empty
// reason ErrEmptyReason, and each changes nothing.
func queueDest_7_11_SetFlowDestinationAudited(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 0, 0), 1)
	putDest(t, ds, testDest("beta", 0, 0), 1)
	enqueueTo(t, s, "a1", "fa", "alpha", 0, 1)
	enqueueTo(t, s, "a2", "fa", "alpha", 0, 1)
	if err := ds.PauseDestination(ctx, "alpha", "down", 1); err != nil {
		t.Fatalf("PauseDestination() error = %v", err)
	}
	before := snap(t, s)
	wantErr(t, "SetFlowDestination(unknown flow)", ds.SetFlowDestination(ctx, "nope", "beta", "move", 2), queue.ErrNotFound)
	wantErr(t, "SetFlowDestination(unknown destination)", ds.SetFlowDestination(ctx, "fa", "gamma", "move", 2), queue.ErrUnknownDestination)
	wantErr(t, "SetFlowDestination(empty reason)", ds.SetFlowDestination(ctx, "fa", "beta", "", 2), queue.ErrEmptyReason)
	wantErr(t, "SetFlowDestination(invalid name)", ds.SetFlowDestination(ctx, "fa", "B!", "move", 2), queue.ErrInvalid)
	assertUnchanged(t, "refused flow destination changes", before, snap(t, s))
	wantNoClaim(t, s, 2) // alpha is paused
	if err := ds.SetFlowDestination(ctx, "fa", "beta", "alpha retired", 3); err != nil {
		t.Fatalf("SetFlowDestination() error = %v", err)
	}
	c := wantClaim(t, s, "a1", 4)
	if c.Destination != "beta" {
		t.Fatalf("claim after the change = %s, want destination beta", jsonOf(c))
	}
	_, err := s.Enqueue(ctx, queue.Event{ID: "a3", Flow: "fa", Body: []byte("x"), Destination: "alpha"}, 5)
	wantErr(t, "Enqueue(the old destination)", err, queue.ErrDestinationMismatch)
	enqueueTo(t, s, "a3", "fa", "beta", 0, 5)
	if err := ds.SetFlowDestination(ctx, "fa", "", "to the default", 6); err != nil {
		t.Fatalf("SetFlowDestination(default) error = %v", err)
	}
	rows := auditOf(t, s, queue.AuditFlowDestination)
	if len(rows) != 2 || rows[0].Reason != "alpha retired" || rows[0].At != 3 {
		t.Fatalf("flow destination rows = %s, want two, the first with its reason and tick", jsonOf(rows))
	}
	for i, want := range []queue.FlowDestinationChange{{Flow: "fa", Old: "alpha", New: "beta"}, {Flow: "fa", Old: "beta", New: ""}} {
		var got queue.FlowDestinationChange
		if err := json.Unmarshal([]byte(rows[i].Detail), &got); err != nil || got != want {
			t.Fatalf("flow destination detail %q (%v), want %+v", rows[i].Detail, err, want)
		}
	}
	if f := flowOf(t, s, "fa"); f.Destination != "" {
		t.Fatalf("Snapshot flow fa = %s, want the default destination", jsonOf(f))
	}
}

// A paused destination's flows are not due (docs/contract.md §7.11): their
// heads are never claimed while it is paused, so NextDue and OldestDue
// leave them out, whether dispatchable already or waiting for a tick (a
// lease end); the heads of the default destination and of a destination
// that is not paused still count. A resume makes them due again with no
// other action.
func queueDest_7_11_PausedDestinationNotDue(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	ds := dests(t, s)
	putDest(t, ds, testDest("alpha", 0, 0), 1)
	putDest(t, ds, testDest("beta", 0, 0), 1)
	enqueueTo(t, s, "a1", "fa", "alpha", 0, 1)
	enqueueTo(t, s, "a2", "fa", "alpha", 0, 1)
	enqueueTo(t, s, "b1", "fb", "alpha", 0, 1)
	wantClaim(t, s, "a1", 1) // fa waits for its lease end, fb is dispatchable
	if err := ds.PauseDestination(ctx, "alpha", "alpha is down", 2); err != nil {
		t.Fatalf("PauseDestination() error = %v", err)
	}
	before := snap(t, s)
	if due, ok := nextDue(t, s); ok {
		t.Fatalf("only heads of a paused destination: NextDue = %d, true; want ok = false", due)
	}
	if due, ok := oldestDue(t, s, 2+2*queue.Lease); ok {
		t.Fatalf("only heads of a paused destination: OldestDue = %d, true; want ok = false", due)
	}
	assertUnchanged(t, "NextDue and OldestDue", before, snap(t, s))

	// A default-destination head scheduled for 3+Lease+50 is the next due
	// tick, although fa's lease ends before it.
	at := 3 + queue.Lease + 50
	if _, err := s.Enqueue(ctx, queue.Event{ID: "d1", Flow: "fd", Body: []byte("x"), NotBefore: at}, 3); err != nil {
		t.Fatalf("Enqueue(scheduled) error = %v", err)
	}
	if due, ok := nextDue(t, s); !ok || due != at {
		t.Fatalf("a scheduled default head: NextDue = %d, %v; want %d (not the paused flows' ticks)", due, ok, at)
	}
	if due, ok := oldestDue(t, s, at-1); ok {
		t.Fatalf("OldestDue(%d) = %d, true; want ok = false (fa's lease end and fb do not count)", at-1, due)
	}
	if due, ok := oldestDue(t, s, at+1); !ok || due != at {
		t.Fatalf("OldestDue(%d) = %d, %v; want %d", at+1, due, ok, at)
	}

	// A dispatchable head of beta, which is not paused, is due now.
	enqueueTo(t, s, "e1", "fe", "beta", 0, 4)
	if due, ok := nextDue(t, s); !ok || due > 4 {
		t.Fatalf("a head of beta: NextDue = %d, %v; want at most 4", due, ok)
	}
	if due, ok := oldestDue(t, s, 5); !ok || due != 4 {
		t.Fatalf("a head of beta: OldestDue(5) = %d, %v; want 4", due, ok)
	}
	c := wantClaim(t, s, "e1", 5)
	if o := settle(t, s, c.EventID, c.Generation, success, 5); o != queue.Acked {
		t.Fatalf("Settle(e1) = %q, want acked", o)
	}
	if due, ok := nextDue(t, s); !ok || due != at {
		t.Fatalf("beta served: NextDue = %d, %v; want %d", due, ok, at)
	}

	if err := ds.ResumeDestination(ctx, "alpha", "alpha is back", 6); err != nil {
		t.Fatalf("ResumeDestination() error = %v", err)
	}
	if due, ok := nextDue(t, s); !ok || due > 6 {
		t.Fatalf("alpha resumed: NextDue = %d, %v; want at most 6 (fb is dispatchable)", due, ok)
	}
	if due, ok := oldestDue(t, s, 6); !ok || due != 1 {
		t.Fatalf("alpha resumed: OldestDue(6) = %d, %v; want fb's 1", due, ok)
	}
	wantClaim(t, s, "b1", 6)
}
