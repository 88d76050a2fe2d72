package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/webhook"
)

// Defaults of the zero HTTPOptions.
const (
	DefaultHTTPTimeout      = 10 * time.Second
	DefaultMaxIdleConns     = 64
	DefaultMaxResponseBytes = 64 << 10
)

// Failure reasons of HTTP delivery (the status mapping of docs/runtime.md).
const (
	ReasonConflict         = "conflict"
	ReasonGap              = "gap"
	ReasonUnsupportedDelta = "unsupported_delta"
	ReasonInvalidBody      = "invalid_body"
	ReasonTooLarge         = "too_large"
	ReasonUnauthorized     = "unauthorized"
	ReasonUnavailable      = "unavailable"
	// Other statuses fail with "http_<code>", for example "http_404".
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
	// Now is the signing time (default time.Now).
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
// wave's deliveries together. The answer maps to the handler's result:
//
//	2xx                                   success (the receiver applied the event, or had before)
//	409 with {"outcome":"gap"}            failure "gap"
//	409 otherwise                         failure "conflict"
//	422                                   failure "unsupported_delta"
//	400                                   failure "invalid_body"
//	413                                   failure "too_large"
//	401                                   failure "unauthorized"
//	5xx, timeout, connection error        failure "unavailable"
//	any other status                      failure "http_<code>"
//
// It is safe for concurrent use.
type HTTP struct {
	url     string
	secrets [][]byte // the NewHTTP secret first, then HTTPOptions.ExtraSecrets
	client  *http.Client
	timeout time.Duration
	maxResp int64
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
	if o.Timeout < 0 || o.MaxIdleConns < 0 || o.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("%w: negative HTTP option", ErrInvalid)
	}
	secrets := [][]byte{bytes.Clone(secret)}
	for _, s := range o.ExtraSecrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: empty extra secret", ErrInvalid)
		}
		secrets = append(secrets, bytes.Clone(s))
	}
	h := &HTTP{url: rawURL, secrets: secrets, client: o.Client, timeout: o.Timeout, maxResp: o.MaxResponseBytes, now: o.Now}
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

// answer is the receiver's JSON answer.
type answer struct {
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
}

// Handle sends e and maps the answer (see HTTP).
func (h *HTTP) Handle(ctx context.Context, e Event) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(e.Body))
	if err != nil {
		return Fail(ReasonUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	webhook.SetHeadersRotating(req.Header, h.secrets, e.ID, e.Flow, e.Seq, h.now(), e.Body)
	if w, ok := WaveOf(ctx); ok {
		req.Header.Set(webhook.HeaderWave, webhook.FormatWave(w.ID(), w.Size()))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return Fail(ReasonUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxResp))
	if err != nil {
		if resp.StatusCode/100 == 2 {
			// The receiver answered success before the body broke off.
			return nil
		}
		return Fail(ReasonUnavailable, fmt.Errorf("read answer: %w", err))
	}
	var a answer
	_ = json.Unmarshal(body, &a) // the status decides; the outcome only tells gap from conflict
	return mapStatus(resp.StatusCode, a)
}

func mapStatus(code int, a answer) error {
	detail := errors.New(strconv.Itoa(code) + " " + http.StatusText(code) + describe(a))
	switch {
	case code/100 == 2:
		return nil
	case code == http.StatusConflict && a.Outcome == ReasonGap:
		return Fail(ReasonGap, detail)
	case code == http.StatusConflict:
		return Fail(ReasonConflict, detail)
	case code == http.StatusUnprocessableEntity:
		return Fail(ReasonUnsupportedDelta, detail)
	case code == http.StatusBadRequest:
		return Fail(ReasonInvalidBody, detail)
	case code == http.StatusRequestEntityTooLarge:
		return Fail(ReasonTooLarge, detail)
	case code == http.StatusUnauthorized:
		return Fail(ReasonUnauthorized, detail)
	case code/100 == 5:
		return Fail(ReasonUnavailable, detail)
	default:
		return Fail("http_"+strconv.Itoa(code), detail)
	}
}

func describe(a answer) string {
	switch {
	case a.Error != "":
		return ": " + a.Error
	case a.Outcome != "":
		return ": " + a.Outcome
	}
	return ""
}

// IsTimeout reports whether err (from HTTP.Handle) was a timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
