package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

// recorder is a Receiver that keeps the message it was given and answers
// what the test asks.
type recorder struct {
	got    *receiverstore.Message
	answer receiverstore.Outcome
	err    error
}

func (r *recorder) Receive(_ context.Context, m receiverstore.Message) (receiverstore.Outcome, error) {
	r.got = &m
	return r.answer, r.err
}

var fuzzAnswers = []struct {
	out    receiverstore.Outcome
	err    error
	status int
	label  string
}{
	{receiverstore.Accepted, nil, 200, "accepted"},
	{receiverstore.Duplicate, nil, 200, "duplicate"},
	{receiverstore.Conflict, nil, 409, "conflict"},
	{receiverstore.Gap, nil, 409, "gap"},
	{receiverstore.UnsupportedDelta, nil, 422, "unsupported_delta"},
	{"", receiverstore.ErrInvalidBody, 400, ErrorInvalidBody},
	{"", receiverstore.ErrInvalid, 400, ErrorInvalidMessage},
	{"", errors.Join(receiverstore.ErrEffect, errors.New("x")), 503, ErrorEffectFailed},
	{"", errors.New("disk on fire"), 500, ErrorInternal},
	{"bogus", nil, 500, ErrorInternal},
}

// FuzzServer drives the request parsing with arbitrary headers and bodies.
// Whatever comes in, the answer is one of the documented statuses with a
// JSON body holding an outcome (and a rule on 400 only); the store is reached
// only by a correctly signed request, and then with exactly the decoded ID, the
// unescaped flow, the seq and the body bytes that were signed; its answer
// maps as StatusFor and the Error constants say.
func FuzzServer(f *testing.F) {
	f.Add("POST", "e1", "tenant-a", "1", []byte(`{"delta": 5}`), true, "", uint8(0))
	f.Add("POST", "e1", "tenant%2Fa%20b", "12", []byte(`{"delta": 5}`), true, "e1", uint8(2))
	f.Add("POST", "e1", "f%zz", "1", []byte(`x`), true, "", uint8(0))
	f.Add("POST", "e1", "f", "-3", []byte(``), true, "", uint8(5))
	f.Add("POST", "e1", "f", "99999999999999999999", []byte(`{}`), true, "", uint8(0))
	f.Add("POST", "", "f", "1", []byte(`{}`), true, "", uint8(0))
	f.Add("POST", "e1", "f", "1", []byte(`{"delta": 1}`), false, "", uint8(0))
	f.Add("GET", "e1", "f", "1", []byte(`{"delta": 1}`), true, "", uint8(0))
	f.Add("POST", "e1", "", "1", bytes.Repeat([]byte("a"), 1025), true, "other", uint8(7))
	f.Add("POST", "e\n1", "f", " 1", []byte("\x00"), true, "", uint8(8))
	now := time.Unix(1_900_000_000, 0)
	f.Fuzz(func(t *testing.T, method, id, flowHdr, seqHdr string, body []byte, sign bool, key string, pick uint8) {
		a := fuzzAnswers[int(pick)%len(fuzzAnswers)]
		rec := &recorder{answer: a.out, err: a.err}
		h := NewServer(rec, secret, ServerOptions{MaxBody: 1024, Now: func() time.Time { return now },
			Logger: slog.New(slog.DiscardHandler)})

		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Method = method // any string, as a raw request line could carry
		setRaw := func(name, v string) { req.Header[http.CanonicalHeaderKey(name)] = []string{v} }
		setRaw(webhook.HeaderID, id)
		setRaw(webhook.HeaderFlow, flowHdr)
		setRaw(webhook.HeaderSeq, seqHdr)
		setRaw(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		if key != "" {
			setRaw(webhook.HeaderIdempotencyKey, key)
		}
		flow, flowErr := url.PathUnescape(flowHdr)
		seq, seqErr := strconv.ParseInt(seqHdr, 10, 64)
		if sign {
			setRaw(webhook.HeaderSignature, webhook.Sign(secret, id, now, body))
			setRaw(webhook.HeaderRoute, webhook.SignRoute(secret, id, now, flow, seq))
		} else {
			setRaw(webhook.HeaderSignature, webhook.Sign([]byte("wrong"), id, now, body))
			setRaw(webhook.HeaderRoute, webhook.SignRoute([]byte("wrong"), id, now, flow, seq))
		}

		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		resp := w.Result()
		raw, _ := io.ReadAll(resp.Body)
		var ans answer
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ans); err != nil || ans.Outcome == "" || (ans.Rule != "") != (resp.StatusCode == 400) {
			t.Fatalf("%d answer %q is not JSON with an outcome, and a rule on 400 only", resp.StatusCode, raw)
		}
		switch resp.StatusCode {
		case 200, 400, 401, 405, 409, 413, 422, 500, 503:
		default:
			t.Fatalf("status %d is not documented", resp.StatusCode)
		}

		decodedID, idErr := webhook.DecodeID(id)
		wellFormed := method == http.MethodPost && len(body) <= 1024 && id != "" && flowHdr != "" && seqHdr != "" &&
			flowErr == nil && seqErr == nil && idErr == nil && (key == "" || key == id)
		reached := rec.got != nil
		switch {
		case reached && (!sign || !wellFormed):
			t.Fatalf("the store was reached by a request that is unsigned or malformed (%d %s)", resp.StatusCode, raw)
		case sign && wellFormed && !reached:
			t.Fatalf("a well-formed signed request did not reach the store: %d %s", resp.StatusCode, raw)
		case !reached:
			if resp.StatusCode == 200 || resp.StatusCode == 409 || resp.StatusCode == 422 {
				t.Fatalf("status %d without the store", resp.StatusCode)
			}
			if !sign && method == http.MethodPost && len(body) <= 1024 && resp.StatusCode != 401 {
				t.Fatalf("a wrongly signed POST got %d, want 401", resp.StatusCode)
			}
			return
		}
		if g := rec.got; g.ID != decodedID || g.Flow != flow || g.Seq != seq || !bytes.Equal(g.Body, body) {
			t.Fatalf("store got %q %q %d %q; want %q %q %d %q", g.ID, g.Flow, g.Seq, g.Body, decodedID, flow, seq, body)
		}
		label := ans.Outcome
		if resp.StatusCode != a.status || label != a.label {
			t.Fatalf("store answer %q/%v became %d %s, want %d %s", a.out, a.err, resp.StatusCode, label, a.status, a.label)
		}
	})
}
