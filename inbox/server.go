package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/webhook"
)

// DefaultMaxBody is the largest request body NewServer reads unless
// ServerOptions.MaxBody says otherwise: 1 MiB, receiver.MaxEffectBodyLen
// (what a store running a user's effect takes).
const DefaultMaxBody = receiver.MaxEffectBodyLen

// Receiver is what the server and Local need of a receiver store;
// *receiverstore.Store (SQLite) and *pgreceiverstore.Store (PostgreSQL)
// satisfy it.
type Receiver interface {
	Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error)
}

// ServerOptions tunes NewServer. The zero value is the default.
type ServerOptions struct {
	// MaxBody is the largest body read, in bytes; a longer one is 413 and
	// touches nothing. <= 0 means DefaultMaxBody.
	MaxBody int64
	// Tolerance is how far a request's webhook-timestamp may lie from the
	// server's clock, either way; <= 0 means webhook.DefaultTolerance (5
	// minutes).
	Tolerance time.Duration
	// Now is the server's clock (tests set it); nil means time.Now.
	Now func() time.Time
	// Logger receives the detail of every internal error (never sent to the
	// client) and one debug line per request; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, gets the server's collectors: fairrelay_receiver_
	// receives_total{outcome} and fairrelay_receiver_receive_seconds{outcome}.
	// Registering twice on one registry panics, as prometheus.MustRegister
	// does.
	Metrics prometheus.Registerer
}

// Request outcomes that are not receiver outcomes, as the JSON "error" and
// the metrics' outcome label say them.
const (
	ErrorInvalidBody    = "invalid_body"       // 400: receiver.ErrInvalidBody (also an effect's refusal)
	ErrorInvalidMessage = "invalid_message"    // 400: receiver.ErrInvalid (ID, flow or seq out of bounds)
	ErrorInvalidHeader  = "invalid_header"     // 400: malformed fairrelay-flow, fairrelay-seq or Idempotency-Key
	ErrorUnauthorized   = "unauthorized"       // 401: signature missing or wrong, timestamp outside the window
	ErrorMethod         = "method_not_allowed" // 405: not a POST
	ErrorTooLarge       = "too_large"          // 413: body above MaxBody
	ErrorEffectFailed   = "effect_failed"      // 503: the store's Effect failed; nothing changed, retry later
	ErrorCanceled       = "canceled"           // 503: the request ended (client gone, server shutting down)
	ErrorInternal       = "internal"           // 500: anything else; detail in the server log only
)

// StatusFor is the HTTP status the server answers for a receiver outcome:
// 200 for accepted and duplicate (the effect is applied, once), 409 for
// conflict and gap, 422 for unsupported_delta. ok is false for an outcome it
// does not know.
func StatusFor(o receiver.Outcome) (status int, ok bool) {
	switch o {
	case receiver.Accepted, receiver.Duplicate:
		return http.StatusOK, true
	case receiver.Conflict, receiver.Gap:
		return http.StatusConflict, true
	case receiver.UnsupportedDelta:
		return http.StatusUnprocessableEntity, true
	}
	return 0, false
}

// server is NewServer's handler.
type server struct {
	r       Receiver
	secret  []byte
	maxBody int64
	tol     time.Duration
	now     func() time.Time
	log     *slog.Logger
	m       *serverMetrics
}

// NewServer returns the receiver's HTTP handler over r (a
// *receiverstore.Store). It answers every path it is mounted on; a request
// is handled in this order, each step answering and stopping on a refusal:
//
//  1. not POST: 405 (with Allow: POST);
//  2. body above MaxBody (by Content-Length, or while reading): 413;
//  3. webhook-signature (the body) and fairrelay-signature (the flow and
//     seq) checked with secret, webhook-timestamp within Tolerance: 401;
//  4. fairrelay-flow (path-escaped) and fairrelay-seq (decimal) malformed,
//     or an Idempotency-Key other than the webhook-id: 400 invalid_header;
//  5. Receive(webhook-id, flow, seq, body): invalid body or message 400,
//     an outcome per StatusFor, an effect's failure 503, anything else 500.
//     A well-formed fairrelay-wave header goes along in the context, for a
//     Batcher to commit the wave's deliveries together (BatcherOptions,
//     WaveWait); a malformed one is ignored.
//
// Steps 1 to 4 touch no database. Every answer is JSON: {"outcome": ...}
// for a receiver outcome, {"error": ...} otherwise (the Error* constants).
// An empty secret refuses every request with 500 and logs why.
func NewServer(r Receiver, secret []byte, o ServerOptions) http.Handler {
	s := &server{r: r, secret: append([]byte(nil), secret...), maxBody: o.MaxBody, tol: o.Tolerance, now: o.Now, log: o.Logger}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.tol <= 0 {
		s.tol = webhook.DefaultTolerance
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if o.Metrics != nil {
		s.m = newServerMetrics(o.Metrics)
	}
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	status, label, isOutcome := s.handle(req)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	if status == http.StatusRequestEntityTooLarge {
		// The rest of an over-large body is not read: close the connection.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(status)
	body := answer{Error: label}
	if isOutcome {
		body = answer{Outcome: label}
	}
	b, _ := json.Marshal(body) // two string fields: cannot fail
	_, _ = w.Write(append(b, '\n'))
	if s.m != nil {
		s.m.observe(label, time.Since(start))
	}
}

// answer is the JSON body of every response.
type answer struct {
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

// handle decides the answer to req: its status and its outcome (isOutcome)
// or error label.
func (s *server) handle(req *http.Request) (status int, label string, isOutcome bool) {
	if req.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, ErrorMethod, false
	}
	if req.ContentLength > s.maxBody {
		return http.StatusRequestEntityTooLarge, ErrorTooLarge, false
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, s.maxBody+1))
	if err != nil {
		if req.Context().Err() != nil {
			return http.StatusServiceUnavailable, ErrorCanceled, false
		}
		s.log.Debug("inbox: reading the request body", "err", err)
		return http.StatusBadRequest, ErrorInvalidBody, false
	}
	if int64(len(body)) > s.maxBody {
		return http.StatusRequestEntityTooLarge, ErrorTooLarge, false
	}

	now := s.now()
	if err := webhook.Verify(s.secret, req.Header, body, now, s.tol); err != nil {
		return s.verifyFailed(err)
	}
	flow, seq, err := webhook.VerifyRoute(s.secret, req.Header, now, s.tol)
	if err != nil {
		return s.verifyFailed(err)
	}
	id := req.Header.Get(webhook.HeaderID)
	if k := req.Header.Values(webhook.HeaderIdempotencyKey); len(k) > 1 || (len(k) == 1 && k[0] != id) {
		return http.StatusBadRequest, ErrorInvalidHeader, false
	}

	ctx := req.Context()
	if wid, n, ok := webhook.ParseWave(req.Header.Get(webhook.HeaderWave)); ok {
		// A hint for a Batcher's group commit only; a malformed one is
		// ignored, since it cannot change what is applied.
		ctx = context.WithValue(ctx, remoteWaveKey{}, waveID{remote: wid, size: n})
	}
	out, err := s.r.Receive(ctx, receiver.Message{ID: id, Flow: flow, Seq: seq, Body: body})
	switch {
	case err == nil:
		if st, ok := StatusFor(out); ok {
			return st, string(out), true
		}
		s.log.Error("inbox: unknown receiver outcome", "outcome", out, "id", id, "flow", flow, "seq", seq)
		return http.StatusInternalServerError, ErrorInternal, false
	case errors.Is(err, receiver.ErrInvalidBody):
		return http.StatusBadRequest, ErrorInvalidBody, false
	case errors.Is(err, receiver.ErrInvalid):
		return http.StatusBadRequest, ErrorInvalidMessage, false
	case errors.Is(err, receiver.ErrEffect):
		s.log.Warn("inbox: effect failed; nothing changed", "id", id, "flow", flow, "seq", seq, "err", err)
		return http.StatusServiceUnavailable, ErrorEffectFailed, false
	case req.Context().Err() != nil:
		s.log.Debug("inbox: request ended during receive; rolled back", "id", id, "err", err)
		return http.StatusServiceUnavailable, ErrorCanceled, false
	}
	s.log.Error("inbox: receive failed", "id", id, "flow", flow, "seq", seq, "err", err)
	return http.StatusInternalServerError, ErrorInternal, false
}

// verifyFailed maps a webhook verification error: a bad signature or
// timestamp is 401, a malformed flow or seq header 400, a server without a
// usable secret 500.
func (s *server) verifyFailed(err error) (int, string, bool) {
	switch {
	case errors.Is(err, webhook.ErrSignature), errors.Is(err, webhook.ErrTimestamp):
		s.log.Debug("inbox: refused request", "err", err)
		return http.StatusUnauthorized, ErrorUnauthorized, false
	case errors.Is(err, webhook.ErrHeader):
		return http.StatusBadRequest, ErrorInvalidHeader, false
	}
	s.log.Error("inbox: cannot verify requests", "err", err)
	return http.StatusInternalServerError, ErrorInternal, false
}

// serverMetrics are the receiver's collectors.
type serverMetrics struct {
	receives *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		receives: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairrelay_receiver_receives_total",
			Help: "Requests the receiver server answered, by outcome (a receiver outcome such as accepted, or a refusal such as unauthorized).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fairrelay_receiver_receive_seconds",
			Help:    "Time from request to answer in the receiver server, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms .. 4 s
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.receives, m.seconds)
	// Known labels start at 0, so that a rate() has a series from the start.
	for _, l := range []string{string(receiver.Accepted), string(receiver.Duplicate), string(receiver.Conflict),
		string(receiver.Gap), string(receiver.UnsupportedDelta), ErrorInvalidBody, ErrorInvalidMessage,
		ErrorInvalidHeader, ErrorUnauthorized, ErrorMethod, ErrorTooLarge, ErrorEffectFailed, ErrorCanceled, ErrorInternal} {
		m.receives.WithLabelValues(l)
	}
	return m
}

func (m *serverMetrics) observe(label string, d time.Duration) {
	m.receives.WithLabelValues(label).Inc()
	m.seconds.WithLabelValues(label).Observe(d.Seconds())
}
