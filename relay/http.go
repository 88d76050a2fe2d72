package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/webhook"
)

// Defaults of the zero HTTPOptions.
const (
	DefaultHTTPTimeout      = 10 * time.Second
	DefaultMaxIdleConns     = 64
	DefaultMaxResponseBytes = 64 << 10
	DefaultMaxRetryAfter    = time.Hour
)

// Failure reasons of HTTP delivery (the classification table of HTTP and
// docs/runtime.md).
const (
	ReasonConflict         = "conflict"          // 409 (not a gap): event failure
	ReasonGap              = "gap"               // 409 {"outcome":"gap"}: event failure
	ReasonUnsupportedDelta = "unsupported_delta" // 422: event failure
	ReasonInvalidBody      = "invalid_body"      // 400: permanent
	ReasonTooLarge         = "too_large"         // 413: permanent
	ReasonUnauthorized     = "unauthorized"      // 401: destination failure
	ReasonForbidden        = "forbidden"         // 403: destination failure
	ReasonNotFound         = "not_found"         // 404: destination failure
	ReasonRateLimited      = "rate_limited"      // 429: destination failure
	ReasonUnavailable      = "unavailable"       // 5xx, connection, DNS, TLS, timeout: destination failure
	// Other statuses fail with "http_<code>", for example "http_418".
)

// HTTPOptions tune HTTP delivery. The zero value of every field means its default.
type HTTPOptions struct {
	// Client sends the requests. Default: a client of its own whose
	// Transport keeps MaxIdleConns idle connections to the host (set it to
	// at least the relay's Concurrency so that every handler reuses a
	// connection) and that does not follow redirects.
	Client *http.Client
	// MaxIdleConns is the idle connections per host of the default client
	// (default 64). Ignored when Client is set.
	MaxIdleConns int
	// Timeout bounds one request, from sending to the end of the answer's
	// body (default 10 s). A request that runs out of it fails "unavailable".
	Timeout time.Duration
	// MaxResponseBytes is the most of an answer's body that is read (default
	// 64 KiB); the rest is not read, and the connection is not reused.
	MaxResponseBytes int64
	// MaxRetryAfter caps the wait a Retry-After header on a 429 or 503
	// answer may ask for (default 1 h); see Failure.RetryAfter.
	MaxRetryAfter time.Duration
	// Now is the signing time, and the time an HTTP-date Retry-After is
	// read against (default time.Now).
	Now func() time.Time
	// ExtraSecrets are more signing secrets, for a rotation: every request
	// is signed with the secret given to NewHTTP and with each of these
	// (webhook.SetHeadersRotating), so a receiver that knows either the old
	// or the new secret accepts it. Each must be non-empty.
	ExtraSecrets [][]byte
}

// HTTP delivers events to one URL as Standard Webhooks requests
// (package webhook): POST, Content-Type application/json, the body
// byte-identical, and the headers webhook-id, webhook-timestamp,
// webhook-signature, Idempotency-Key, fairrelay-flow, fairrelay-seq and
// fairrelay-signature, and, for a handler the relay started in a wave
// (WaveOf), fairrelay-wave: a hint that lets the receiver commit the
// wave's deliveries together. The answer maps to the handler's result
// (docs/runtime.md "Failure classification"):
//
//	2xx                               success (the receiver applied the event, or had before)
//	400                               "invalid_body", permanent; the error text names the receiver's rule
//	413                               "too_large", permanent
//	409 with {"outcome":"gap"}        "gap", event failure
//	409 otherwise                     "conflict", event failure
//	422                               "unsupported_delta", event failure
//	401, 403, 404                     "unauthorized", "forbidden", "not_found", destination failure
//	429                               "rate_limited", destination failure, Retry-After honoured
//	503                               "unavailable", destination failure, Retry-After honoured
//	other 5xx                         "unavailable", destination failure
//	connection refused, DNS, TLS,
//	timeout, a broken answer          "unavailable", destination failure
//	any other status                  "http_<code>", event failure
//
// Event failures and destination failures are transient: the queue retries
// them after its backoff (or the Retry-After, capped by
// HTTPOptions.MaxRetryAfter and the queue's policy). Destination failures
// also feed the relay's breaker. Every failure's error text says what
// happened (the status and the receiver's error, or the transport's error,
// with any user info in the URL redacted).
//
// It is safe for concurrent use.
type HTTP struct {
	url     string
	secrets [][]byte // the NewHTTP secret first, then HTTPOptions.ExtraSecrets
	client  *http.Client
	timeout time.Duration
	maxResp int64
	maxRA   time.Duration
	now     func() time.Time
}

// NewHTTP returns an HTTP handler that delivers to rawURL, signing with
// secret. An URL that is not absolute http or https, an empty secret or
// negative options are ErrInvalid.
func NewHTTP(rawURL string, secret []byte, o HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint %q is not an absolute http(s) URL", ErrInvalid, rawURL)
	}
	if len(secret) == 0 {
		return nil, fmt.Errorf("%w: empty secret", ErrInvalid)
	}
	if o.Timeout < 0 || o.MaxIdleConns < 0 || o.MaxResponseBytes < 0 || o.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("%w: negative HTTP option", ErrInvalid)
	}
	secrets := [][]byte{bytes.Clone(secret)}
	for _, s := range o.ExtraSecrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: empty extra secret", ErrInvalid)
		}
		secrets = append(secrets, bytes.Clone(s))
	}
	h := &HTTP{url: rawURL, secrets: secrets, client: o.Client, timeout: o.Timeout, maxResp: o.MaxResponseBytes, maxRA: o.MaxRetryAfter, now: o.Now}
	if h.maxRA == 0 {
		h.maxRA = DefaultMaxRetryAfter
	}
	if h.timeout == 0 {
		h.timeout = DefaultHTTPTimeout
	}
	if h.maxResp == 0 {
		h.maxResp = DefaultMaxResponseBytes
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.client == nil {
		idle := o.MaxIdleConns
		if idle == 0 {
			idle = DefaultMaxIdleConns
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = idle
		t.MaxIdleConnsPerHost = idle
		h.client = &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return h, nil
}

// answer is the receiver's JSON answer: {"outcome":"invalid_body",
// "rule":"delta_out_of_range","error":"…"} (rule on a 400 only).
type answer struct {
	Outcome string `json:"outcome"`
	Rule    string `json:"rule"`
	Error   string `json:"error"`
}

// Handle sends e and maps the answer (see HTTP).
func (h *HTTP) Handle(ctx context.Context, e Event) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(e.Body))
	if err != nil {
		return FailDestination(ReasonUnavailable, redactErr(err))
	}
	req.Header.Set("Content-Type", "application/json")
	webhook.SetHeadersRotating(req.Header, h.secrets, e.ID, e.Flow, e.Seq, h.now(), e.Body)
	if w, ok := WaveOf(ctx); ok {
		req.Header.Set(webhook.HeaderWave, webhook.FormatWave(w.ID(), w.Size()))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return FailDestination(ReasonUnavailable, redactErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxResp))
	if err != nil {
		if resp.StatusCode/100 == 2 {
			// The receiver answered success before the body broke off.
			return nil
		}
		return FailDestination(ReasonUnavailable, fmt.Errorf("%d %s, then reading the answer: %w", resp.StatusCode, http.StatusText(resp.StatusCode), redactErr(err)))
	}
	var a answer
	_ = json.Unmarshal(body, &a) // the status decides; the outcome tells gap from conflict, rule and error explain
	f := classify(resp.StatusCode, a)
	if f != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.now()); ok {
			f.WithRetryAfter(min(d, h.maxRA))
		}
	}
	if f == nil {
		return nil
	}
	return f
}

// classify maps a status and the receiver's answer to nil (success) or
// the failure of the table in HTTP's documentation.
func classify(code int, a answer) *Failure {
	detail := errors.New(strconv.Itoa(code) + " " + http.StatusText(code) + describe(a))
	switch {
	case code/100 == 2:
		return nil
	case code == http.StatusBadRequest:
		return FailPermanent(ReasonInvalidBody, detail)
	case code == http.StatusRequestEntityTooLarge:
		return FailPermanent(ReasonTooLarge, detail)
	case code == http.StatusConflict && a.Outcome == ReasonGap:
		return &Failure{Reason: ReasonGap, Err: detail}
	case code == http.StatusConflict:
		return &Failure{Reason: ReasonConflict, Err: detail}
	case code == http.StatusUnprocessableEntity:
		return &Failure{Reason: ReasonUnsupportedDelta, Err: detail}
	case code == http.StatusUnauthorized:
		return FailDestination(ReasonUnauthorized, detail)
	case code == http.StatusForbidden:
		return FailDestination(ReasonForbidden, detail)
	case code == http.StatusNotFound:
		return FailDestination(ReasonNotFound, detail)
	case code == http.StatusTooManyRequests:
		return FailDestination(ReasonRateLimited, detail)
	case code/100 == 5:
		return FailDestination(ReasonUnavailable, detail)
	default:
		return &Failure{Reason: "http_" + strconv.Itoa(code), Err: detail}
	}
}

// describe is the receiver's explanation: ": rule R: error" (either part
// may be missing), or ": outcome" when it gave only an outcome.
func describe(a answer) string {
	var s string
	if a.Rule != "" {
		s += ": rule " + a.Rule
	}
	switch {
	case a.Error != "":
		s += ": " + a.Error
	case a.Outcome != "" && a.Rule == "":
		s += ": " + a.Outcome
	}
	return s
}

// parseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3): a number
// of seconds, or an HTTP date read against now (a date in the past is no
// wait). It reports false for an absent or unreadable header.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 63); err == nil {
		if secs > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64, true // capped by the caller
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// redactErr returns err with user info redacted from the URL of a
// *url.Error (the client's errors name the request URL).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		c := *ue
		c.URL = RedactURLs(c.URL)
		return &c
	}
	return err
}

// IsTimeout reports whether err (from HTTP.Handle) was a timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
