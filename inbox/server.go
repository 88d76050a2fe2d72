package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
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
	// touches nothing. <= 0 means DefaultMaxBody; any larger value, up to
	// math.MaxInt64, is allowed.
	MaxBody int64
	// Tolerance is how far a request's webhook-timestamp may lie from the
	// server's clock, either way; <= 0 means webhook.DefaultTolerance (5
	// minutes).
	Tolerance time.Duration
	// Now is the server's clock (tests set it); nil means time.Now. It also
	// paces the refusal log (LogEvery).
	Now func() time.Time
	// Logger receives the detail of every internal error (never sent to the
	// client), one WARN line per refusal (rate-limited, see LogEvery) and
	// one debug line per request; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, gets the server's collectors: fairrelay_receiver_
	// receives_total{outcome} and fairrelay_receiver_receive_seconds{outcome}.
	// Registering twice on one registry panics, as prometheus.MustRegister
	// does.
	Metrics prometheus.Registerer
	// ExtraSecrets are more secrets a request may be signed with, beside
	// the one given to NewServer (a rotation, docs/receiver-server.md): a
	// request verifies when any one of them verifies it. Each must be
	// non-empty, or every request is refused with 500.
	ExtraSecrets [][]byte
	// Path, when set, is the one URL path deliveries are received on; any
	// other path is 404 not_found. "" receives on every path the handler
	// is mounted on.
	Path string
	// MetricsPath, with MetricsHandler, is the path where MetricsHandler
	// answers GET and HEAD; any other method there is 405 (Allow: GET,
	// HEAD), so a sender given that URL by mistake never sees a 200.
	MetricsPath string
	// MetricsHandler serves the metrics at MetricsPath (promhttp's
	// handler); nil, or an empty MetricsPath, serves none.
	MetricsHandler http.Handler
	// Hosts are the host names (no port) a request's Host header may name
	// besides the ones always accepted: an IP address, "localhost" and
	// names under ".localhost". A request that arrived on a loopback
	// address with any other name is 403 host_not_allowed (DNS rebinding:
	// a web page whose name resolves to 127.0.0.1 must not reach a
	// loopback receiver or its metrics). With Hosts set, the same check
	// holds on every address; "*" accepts every name. A request that
	// arrived on no listener (ServeHTTP called in process) is not checked.
	Hosts []string
	// LogEvery and LogBurst pace the WARN line of each refusal reason: at
	// most LogBurst lines at once, then one per LogEvery; the next line of
	// a reason says how many of its refusals were not logged
	// ("suppressed"). Zero means 1 s and 5; LogEvery < 0 logs every
	// refusal.
	LogEvery time.Duration
	LogBurst int
	// Retention, when above 0, turns on pruning (docs/contract.md §7.9):
	// every PruneEvery the server deletes the receipts accepted more than
	// Retention before its clock (Now), in batches of PruneBatch, each
	// batch one short transaction, until none is left; until Close. A
	// delivery whose receipt was deleted is answered 200 {"outcome":
	// "pruned"} and applied nothing, so Retention must be longer than the
	// longest time a sender may still deliver an event again (its
	// retries, a redrive): past that, a redelivery cannot be compared with
	// the message applied. 0, the default, keeps every receipt.
	Retention time.Duration
	// PruneEvery is the time between two prunes; <= 0 means
	// DefaultPruneEvery. The first prune runs at once.
	PruneEvery time.Duration
	// PruneBatch is the most receipts one batch deletes, 1..
	// receiver.MaxPruneBatch; 0 means receiver.DefaultPruneBatch.
	PruneBatch int
	// Pruner is the store to prune; nil means the Receiver given to
	// NewServer, when it is a receiver.Pruner (a *receiverstore.Store or
	// *pgreceiverstore.Store is; a Batcher is not: give its store here).
	Pruner receiver.Pruner
}

// DefaultPruneEvery is the time between two prunes unless
// ServerOptions.PruneEvery says otherwise.
const DefaultPruneEvery = time.Minute

// Request outcomes that are not receiver outcomes, as the JSON "outcome"
// and the metrics' outcome label say them.
const (
	ErrorInvalidBody    = "invalid_body"       // 400: receiver.ErrInvalidBody (also an effect's refusal)
	ErrorInvalidMessage = "invalid_message"    // 400: receiver.ErrInvalid (ID, flow or seq out of bounds)
	ErrorInvalidHeader  = "invalid_header"     // 400: malformed webhook-id, fairrelay-flow, fairrelay-seq or Idempotency-Key
	ErrorUnauthorized   = "unauthorized"       // 401: signature missing or wrong, timestamp outside the window
	ErrorHostNotAllowed = "host_not_allowed"   // 403: a Host header the server does not answer for (ServerOptions.Hosts)
	ErrorNotFound       = "not_found"          // 404: not ServerOptions.Path
	ErrorMethod         = "method_not_allowed" // 405: not a POST (not GET or HEAD on the metrics path)
	ErrorTooLarge       = "too_large"          // 413: body above MaxBody
	ErrorEffectFailed   = "effect_failed"      // 503: the store's Effect failed; nothing changed, retry later
	ErrorCanceled       = "canceled"           // 503: the request ended (client gone, server shutting down)
	ErrorInternal       = "internal"           // 500: anything else; detail in the server log only
)

// Rules of a 400 answer other than a body's (whose rules are
// receiver.BodyRule): the "rule" of invalid_message, invalid_header, and of
// an invalid_body whose bytes could not be read.
const (
	RuleInvalidID      = "invalid_id"      // invalid_message: the ID breaks receiver.ValidName
	RuleInvalidFlow    = "invalid_flow"    // invalid_message: the flow breaks receiver.ValidName
	RuleInvalidSeq     = "invalid_seq"     // invalid_message: seq below 1
	RuleIDHeader       = "id_header"       // invalid_header: webhook-id not in webhook.EncodeID's form
	RuleRouteHeader    = "route_header"    // invalid_header: fairrelay-flow or fairrelay-seq missing or malformed
	RuleIdempotencyKey = "idempotency_key" // invalid_header: Idempotency-Key other than webhook-id, or repeated
	RuleUnreadableBody = "unreadable_body" // invalid_body: the request body broke off while read
)

// StatusFor is the HTTP status the server answers for a receiver outcome:
// 200 for accepted, duplicate and pruned (the effect is applied, once; a
// pruned message's receipt was deleted by retention, docs/contract.md
// §7.9), 409 for conflict and gap, 422 for unsupported_delta. ok is false
// for an outcome it does not know.
func StatusFor(o receiver.Outcome) (status int, ok bool) {
	if o.Applied() {
		return http.StatusOK, true
	}
	switch o {
	case receiver.Conflict, receiver.Gap:
		return http.StatusConflict, true
	case receiver.UnsupportedDelta:
		return http.StatusUnprocessableEntity, true
	}
	return 0, false
}

// Server is the receiver's HTTP handler that NewServer makes. With
// ServerOptions.Retention set it also prunes the receiver's receipts in the
// background until Close.
type Server struct {
	r           Receiver
	secrets     [][]byte
	maxBody     int64
	tol         time.Duration
	now         func() time.Time
	log         *slog.Logger
	m           *serverMetrics
	path        string
	metricsPath string
	metrics     http.Handler
	hosts       map[string]bool
	anyHost     bool
	refusals    *refusalLog
	pruning     *pruneLoop // nil: no retention
}

// NewServer returns the receiver's HTTP handler over r (a
// *receiverstore.Store). A request is handled in this order, each step
// answering and stopping on a refusal:
//
//  1. a Host the server does not answer for (ServerOptions.Hosts): 403;
//  2. the metrics path (ServerOptions.MetricsPath): GET and HEAD served,
//     anything else 405; a path other than ServerOptions.Path: 404;
//  3. not POST: 405 (with Allow: POST);
//  4. body above MaxBody (by Content-Length, or while reading): 413;
//  5. webhook-signature (the body) and fairrelay-signature (the flow and
//     seq) checked with secret and ServerOptions.ExtraSecrets (any one
//     verifying is enough), webhook-timestamp within Tolerance: 401;
//  6. webhook-id not in webhook.EncodeID's form, fairrelay-flow
//     (path-escaped) or fairrelay-seq (decimal) malformed, or an
//     Idempotency-Key other than the webhook-id: 400 invalid_header;
//  7. Receive(the decoded webhook-id, flow, seq, body): invalid body or
//     message 400, an outcome per StatusFor, an effect's failure 503,
//     anything else 500. A well-formed fairrelay-wave header goes along in
//     the context, for a Batcher to commit the wave's deliveries together
//     (BatcherOptions, WaveWait); a malformed one is ignored.
//
// Steps 1 to 6 touch no database. Every answer is JSON: {"outcome": ...}
// with the receiver outcome or the refusal (the Error* constants), a
// refusal's "error" in words, and on 400 the "rule" that failed
// (receiver.BodyRule, or the Rule* constants). Every refusal is logged at
// WARN, rate-limited per reason (ServerOptions.LogEvery). An empty secret
// refuses every request with 500 and logs why.
//
// With ServerOptions.Retention above 0, the server also prunes the
// receiver's receipts (docs/contract.md §7.9; see ServerOptions.Retention)
// in a goroutine of its own, until Close. NewServer panics, as
// prometheus.MustRegister does, when Retention is set and there is no
// receiver.Pruner to prune (neither ServerOptions.Pruner nor r is one), or
// ServerOptions.PruneBatch is outside 0..receiver.MaxPruneBatch: a
// configuration that cannot work is refused at start, not at the first
// prune.
func NewServer(r Receiver, secret []byte, o ServerOptions) *Server {
	s := &Server{r: r, maxBody: o.MaxBody, tol: o.Tolerance, now: o.Now, log: o.Logger,
		path: o.Path, metricsPath: o.MetricsPath, metrics: o.MetricsHandler}
	s.secrets = append(s.secrets, bytes.Clone(secret))
	for _, x := range o.ExtraSecrets {
		s.secrets = append(s.secrets, bytes.Clone(x))
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	// The body is read up to maxBody+1 bytes, which must not wrap: no
	// body comes near this bound anyway.
	s.maxBody = min(s.maxBody, math.MaxInt64-1)
	if s.tol <= 0 {
		s.tol = webhook.DefaultTolerance
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.metricsPath == "" || s.metrics == nil {
		s.metricsPath, s.metrics = "", nil
	}
	if o.Hosts != nil {
		s.hosts = make(map[string]bool, len(o.Hosts))
		for _, h := range o.Hosts {
			s.anyHost = s.anyHost || h == "*"
			s.hosts[hostName(h)] = true
		}
	}
	if o.Metrics != nil {
		s.m = newServerMetrics(o.Metrics)
	}
	s.refusals = newRefusalLog(s.log, s.now, o.LogEvery, o.LogBurst)
	if o.Retention > 0 {
		s.pruning = startPruning(r, o, s.now, s.log, s.m)
	}
	return s
}

// Close stops the server's background pruning, waiting for a batch in
// progress to end (its transaction commits or rolls back), and returns at
// once for a server without retention. Call it after the http.Server
// serving the handler has shut down; the handler itself keeps answering.
// Close may be called more than once.
func (s *Server) Close() error {
	if s.pruning != nil {
		s.pruning.stop()
	}
	return nil
}

// reply is the server's answer to one request, and what its log line says.
type reply struct {
	status  int
	outcome string // a receiver outcome, or an Error* label
	rule    string // on 400 only
	words   string // a refusal's detail, sent as "error"
	// known after verification, for the log
	id, flow string
	seq      int64
}

// ServeHTTP answers one delivery: it checks the request (host, path,
// method, size, signatures, timestamp and headers), then receives its event
// and answers with the status and JSON body the package documentation lists.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	if !s.hostAllowed(req) {
		s.answer(w, req, start, reply{status: http.StatusForbidden, outcome: ErrorHostNotAllowed,
			words: fmt.Sprintf("this receiver does not answer for the host %q (its allowed hosts are configured)", req.Host)})
		return
	}
	if s.metrics != nil && req.URL.Path == s.metricsPath {
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			s.metrics.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Allow", "GET, HEAD")
		s.answer(w, req, start, reply{status: http.StatusMethodNotAllowed, outcome: ErrorMethod,
			words: "the metrics path answers GET and HEAD only; deliveries go to " + s.deliveryPath()})
		return
	}
	if s.path != "" && req.URL.Path != s.path {
		s.answer(w, req, start, reply{status: http.StatusNotFound, outcome: ErrorNotFound,
			words: "no such path; deliveries go to " + s.deliveryPath()})
		return
	}
	s.answer(w, req, start, s.handle(req))
}

func (s *Server) deliveryPath() string {
	if s.path == "" {
		return "any other path"
	}
	return s.path
}

// answer writes r as the JSON answer, logs a refusal and counts it.
func (s *Server) answer(w http.ResponseWriter, req *http.Request, start time.Time, r reply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") == "" {
		w.Header().Set("Allow", http.MethodPost)
	}
	if r.status == http.StatusRequestEntityTooLarge {
		// The rest of an over-large body is not read: close the connection.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(r.status)
	b, _ := json.Marshal(answer{Outcome: r.outcome, Rule: r.rule, Error: r.words}) // strings only: cannot fail
	_, _ = w.Write(append(b, '\n'))
	if r.status >= 400 && r.status != http.StatusInternalServerError && r.outcome != ErrorEffectFailed && r.outcome != ErrorCanceled {
		// Internal errors and effect failures have their own lines; a
		// canceled request is the client's or the shutdown's doing.
		attrs := []any{"status", r.status, "remote", req.RemoteAddr}
		if r.rule != "" {
			attrs = append(attrs, "rule", r.rule)
		}
		if r.id != "" {
			attrs = append(attrs, "id", r.id, "flow", r.flow, "seq", r.seq)
		}
		if r.words != "" {
			attrs = append(attrs, "err", r.words)
		}
		s.refusals.warn(r.outcome, attrs...)
	}
	if s.m != nil {
		s.m.observe(r.outcome, time.Since(start))
	}
}

// answer is the JSON body of every response: the outcome (a receiver
// outcome or a refusal), and for a refusal the rule that failed (400 only)
// and the error in words.
type answer struct {
	Outcome string `json:"outcome"`
	Rule    string `json:"rule,omitempty"`
	Error   string `json:"error,omitempty"`
}

// hostAllowed applies ServerOptions.Hosts to req's Host header.
func (s *Server) hostAllowed(req *http.Request) bool {
	if s.anyHost {
		return true
	}
	local, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true // in process: no listener, no rebinding
	}
	name := hostName(req.Host)
	switch {
	case name == "", net.ParseIP(name) != nil, name == "localhost", strings.HasSuffix(name, ".localhost"), s.hosts[name]:
		return true
	}
	if s.hosts != nil {
		return false
	}
	// A Unix socket is as local as loopback: only a local proxy reaches
	// it, so it is checked as loopback is (docs/receiver-server.md).
	tcp, ok := local.(*net.TCPAddr)
	return ok && !tcp.IP.IsLoopback()
}

// hostName is a Host header's or a configured host's name: no port, no
// brackets, no zone, no final dot, lower case.
func hostName(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if i := strings.IndexByte(h, '%'); i >= 0 && strings.Contains(h, ":") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// handle decides the answer to a delivery.
func (s *Server) handle(req *http.Request) reply {
	if req.Method != http.MethodPost {
		return reply{status: http.StatusMethodNotAllowed, outcome: ErrorMethod, words: "deliveries are POST requests"}
	}
	if req.ContentLength > s.maxBody {
		return reply{status: http.StatusRequestEntityTooLarge, outcome: ErrorTooLarge,
			words: fmt.Sprintf("Content-Length %d is above %d bytes", req.ContentLength, s.maxBody)}
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, s.maxBody+1))
	if err != nil {
		if req.Context().Err() != nil {
			return reply{status: http.StatusServiceUnavailable, outcome: ErrorCanceled, words: "the request ended"}
		}
		return reply{status: http.StatusBadRequest, outcome: ErrorInvalidBody, rule: RuleUnreadableBody,
			words: "reading the body: " + err.Error()}
	}
	if int64(len(body)) > s.maxBody {
		return reply{status: http.StatusRequestEntityTooLarge, outcome: ErrorTooLarge,
			words: fmt.Sprintf("the body is above %d bytes", s.maxBody)}
	}

	now := s.now()
	if err := webhook.VerifyAny(s.secrets, req.Header, body, now, s.tol); err != nil {
		return s.verifyFailed(err)
	}
	flow, seq, err := webhook.VerifyRouteAny(s.secrets, req.Header, now, s.tol)
	if err != nil {
		return s.verifyFailed(err)
	}
	wireID := req.Header.Get(webhook.HeaderID)
	id, err := webhook.DecodeID(wireID)
	if err != nil {
		return reply{status: http.StatusBadRequest, outcome: ErrorInvalidHeader, rule: RuleIDHeader, words: err.Error()}
	}
	if k := req.Header.Values(webhook.HeaderIdempotencyKey); len(k) > 1 || (len(k) == 1 && k[0] != wireID) {
		return reply{status: http.StatusBadRequest, outcome: ErrorInvalidHeader, rule: RuleIdempotencyKey,
			words: webhook.HeaderIdempotencyKey + " must be the " + webhook.HeaderID + ", once", id: id, flow: flow, seq: seq}
	}

	ctx := req.Context()
	if wid, n, ok := webhook.ParseWave(req.Header.Get(webhook.HeaderWave)); ok {
		// A hint for a Batcher's group commit only; a malformed one is
		// ignored, since it cannot change what is applied.
		ctx = context.WithValue(ctx, remoteWaveKey{}, waveID{remote: wid, size: n})
	}
	m := receiver.Message{ID: id, Flow: flow, Seq: seq, Body: body}
	out, err := s.r.Receive(ctx, m)
	r := reply{id: id, flow: flow, seq: seq}
	switch {
	case err == nil:
		if st, ok := StatusFor(out); ok {
			r.status, r.outcome = st, string(out)
			return r
		}
		s.log.Error("inbox: unknown receiver outcome", "outcome", out, "id", id, "flow", flow, "seq", seq)
		r.status, r.outcome = http.StatusInternalServerError, ErrorInternal
	case errors.Is(err, receiver.ErrInvalidBody):
		rule, _ := receiver.BodyRuleOf(err)
		r.status, r.outcome, r.rule, r.words = http.StatusBadRequest, ErrorInvalidBody, string(rule), fromSentinel(err, receiver.ErrInvalidBody)
		if be, ok := errors.AsType[*receiver.BodyError](err); ok {
			r.words = be.Detail
		}
	case errors.Is(err, receiver.ErrInvalid):
		r.status, r.outcome, r.rule, r.words = http.StatusBadRequest, ErrorInvalidMessage, messageRule(m), fromSentinel(err, receiver.ErrInvalid)
	case errors.Is(err, receiver.ErrEffect):
		s.log.Warn("inbox: effect failed; nothing changed", "id", id, "flow", flow, "seq", seq, "err", err)
		r.status, r.outcome, r.words = http.StatusServiceUnavailable, ErrorEffectFailed, "the receiver's effect failed; nothing changed, retry later"
	case req.Context().Err() != nil:
		s.log.Debug("inbox: request ended during receive; rolled back", "id", id, "err", err)
		r.status, r.outcome, r.words = http.StatusServiceUnavailable, ErrorCanceled, "the request ended"
	default:
		s.log.Error("inbox: receive failed", "id", id, "flow", flow, "seq", seq, "err", err)
		r.status, r.outcome = http.StatusInternalServerError, ErrorInternal
	}
	if r.outcome == ErrorInternal {
		r.words = "internal error; the detail is in the receiver's log"
	}
	return r
}

// fromSentinel is err's text from its sentinel on, without the context a
// store wrapped it in ("receive: ...").
func fromSentinel(err, sentinel error) string {
	msg := err.Error()
	if i := strings.Index(msg, sentinel.Error()); i > 0 {
		return msg[i:]
	}
	return msg
}

// messageRule names the part of m that receiver.Validate refused, in its
// order (the body was valid).
func messageRule(m receiver.Message) string {
	switch {
	case receiver.ValidName("ID", m.ID) != nil:
		return RuleInvalidID
	case receiver.ValidName("Flow", m.Flow) != nil:
		return RuleInvalidFlow
	}
	return RuleInvalidSeq
}

// verifyFailed maps a webhook verification error: a bad signature or
// timestamp is 401, a malformed flow or seq header 400, a server without a
// usable secret 500.
func (s *Server) verifyFailed(err error) reply {
	switch {
	case errors.Is(err, webhook.ErrSignature), errors.Is(err, webhook.ErrTimestamp):
		return reply{status: http.StatusUnauthorized, outcome: ErrorUnauthorized, words: err.Error()}
	case errors.Is(err, webhook.ErrHeader):
		return reply{status: http.StatusBadRequest, outcome: ErrorInvalidHeader, rule: RuleRouteHeader, words: err.Error()}
	}
	s.log.Error("inbox: cannot verify requests", "err", err)
	return reply{status: http.StatusInternalServerError, outcome: ErrorInternal, words: "internal error; the detail is in the receiver's log"}
}

// serverMetrics are the receiver's collectors.
type serverMetrics struct {
	receives    *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	pruned      prometheus.Counter
	pruneErrors prometheus.Counter
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
	m.pruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fairrelay_receiver_pruned_total",
		Help: "Receipts the receiver server's retention deleted (ServerOptions.Retention).",
	})
	m.pruneErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fairrelay_receiver_prune_errors_total",
		Help: "Prunes of the receiver server's retention that failed (the detail is in its log); the next one tries again.",
	})
	reg.MustRegister(m.receives, m.seconds, m.pruned, m.pruneErrors)
	// Known labels start at 0, so that a rate() has a series from the start.
	for _, l := range []string{string(receiver.Accepted), string(receiver.Duplicate), string(receiver.Conflict),
		string(receiver.Gap), string(receiver.UnsupportedDelta), string(receiver.Pruned), ErrorInvalidBody, ErrorInvalidMessage,
		ErrorInvalidHeader, ErrorUnauthorized, ErrorHostNotAllowed, ErrorNotFound, ErrorMethod, ErrorTooLarge,
		ErrorEffectFailed, ErrorCanceled, ErrorInternal} {
		m.receives.WithLabelValues(l)
	}
	return m
}

func (m *serverMetrics) observe(label string, d time.Duration) {
	m.receives.WithLabelValues(label).Inc()
	m.seconds.WithLabelValues(label).Observe(d.Seconds())
}
