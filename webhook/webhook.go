package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery. Go's http.Header canonicalises them; the
// constants are spelled as the Standard Webhooks convention writes them.
const (
	// HeaderID carries the event ID (the standard's message ID).
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the signing time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one or more space-separated "v1,<base64>" signatures.
	HeaderSignature = "webhook-signature"
	// HeaderFlow carries the event's flow, url.PathEscape'd.
	HeaderFlow = "fairrelay-flow"
	// HeaderSeq carries the event's sequence number in decimal.
	HeaderSeq = "fairrelay-seq"
	// HeaderIdempotencyKey carries the event ID once more, for receivers that
	// deduplicate on the common Idempotency-Key header.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderRoute carries the signature that binds flow and sequence number:
	// "v1,<base64(HMAC-SHA256(secret, id.timestamp.flow.seq))>".
	HeaderRoute = "fairrelay-signature"
	// HeaderWave, optional and unsigned, carries "<id>/<size>": the sender
	// delivered this event together with size-1 others under the same id
	// (a relay's wave of handlers). A receiver may wait for the others to
	// commit them together; it is a hint for batching, never for what is
	// applied. See FormatWave and ParseWave.
	HeaderWave = "fairrelay-wave"
)

// MaxWaveID is the longest wave id ParseWave accepts.
const MaxWaveID = 64

// FormatWave returns the HeaderWave value of a wave.
func FormatWave(id string, size int) string {
	return id + "/" + strconv.Itoa(size)
}

// ParseWave reads a HeaderWave value: an id of 1 to MaxWaveID printable
// ASCII characters other than '/', a slash, and a size from 1 to 1<<20.
// Anything else is not ok.
func ParseWave(v string) (id string, size int, ok bool) {
	i := strings.LastIndexByte(v, '/')
	if i < 1 || i > MaxWaveID {
		return "", 0, false
	}
	for _, c := range []byte(v[:i]) {
		if c <= ' ' || c >= 0x7f || c == '/' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(v[i+1:])
	if err != nil || n < 1 || n > 1<<20 || v[i+1] == '+' {
		return "", 0, false
	}
	return v[:i], n, true
}

// DefaultTolerance is the timestamp window Verify and VerifyRoute use when
// they are given a tolerance <= 0: five minutes, the standard's suggestion.
const DefaultTolerance = 5 * time.Minute

// SecretPrefix marks a Standard Webhooks secret: "whsec_" followed by the
// base64 of the key bytes.
const SecretPrefix = "whsec_"

// Sentinel errors; test for them with errors.Is.
var (
	// ErrSignature reports a missing webhook-id or signature header, or no
	// signature that matches the request.
	ErrSignature = errors.New("webhook: no matching signature")
	// ErrTimestamp reports a missing or malformed webhook-timestamp, or one
	// further than the tolerance from now (too old or in the future).
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrHeader reports a malformed fairrelay-flow or fairrelay-seq header.
	ErrHeader = errors.New("webhook: malformed header")
	// ErrSecret reports an empty secret, or a "whsec_" secret that is not
	// valid base64.
	ErrSecret = errors.New("webhook: invalid secret")
)

// ParseSecret turns a configured secret into key bytes. A string that starts
// with "whsec_" is the Standard Webhooks form and the rest is decoded as
// standard base64; any other string is used as is. An empty secret, or an
// empty or undecodable whsec_ payload, is ErrSecret.
func ParseSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %s payload is not base64: %v", ErrSecret, SecretPrefix, err)
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: empty %s payload", ErrSecret, SecretPrefix)
		}
		return key, nil
	}
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrSecret)
	}
	return []byte(s), nil
}

// Sign returns the Standard Webhooks signature of a request:
// "v1," + base64(HMAC-SHA256(secret, id + "." + unix seconds of ts + "." + body)).
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, ts.Unix(), body))
}

// SignRoute returns the fairrelay-signature value binding flow and seq:
// "v1," + base64(HMAC-SHA256(secret, id + "." + unix seconds + "." + flow + "." + seq)).
// The flow is signed raw, not escaped.
func SignRoute(secret []byte, id string, ts time.Time, flow string, seq int64) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, ts.Unix(), routeContent(flow, seq)))
}

// SetHeaders sets every header of a delivery on h: the three standard ones,
// the idempotency key, flow, sequence number and the route signature, all
// signed at ts.
func SetHeaders(h http.Header, secret []byte, id, flow string, seq int64, ts time.Time, body []byte) {
	SetHeadersRotating(h, [][]byte{secret}, id, flow, seq, ts, body)
}

// SetHeadersRotating is SetHeaders signing with several secrets at once, as
// Standard Webhooks allows during a secret rotation: each signature header
// carries one space-separated "v1," entry per secret, in the order given,
// and a receiver that knows any one of the secrets verifies the request.
// secrets must not be empty.
func SetHeadersRotating(h http.Header, secrets [][]byte, id, flow string, seq int64, ts time.Time, body []byte) {
	sig := make([]string, len(secrets))
	route := make([]string, len(secrets))
	for i, s := range secrets {
		sig[i] = Sign(s, id, ts, body)
		route[i] = SignRoute(s, id, ts, flow, seq)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sig, " "))
	h.Set(HeaderIdempotencyKey, id)
	h.Set(HeaderFlow, url.PathEscape(flow))
	h.Set(HeaderSeq, strconv.FormatInt(seq, 10))
	h.Set(HeaderRoute, strings.Join(route, " "))
}

// Verify checks a request's standard headers against body: the timestamp
// must lie within tolerance of now (either direction; tolerance <= 0 means
// DefaultTolerance) and at least one "v1" signature in webhook-signature must
// match. Entries of other versions are ignored. It returns nil, or an error
// wrapping ErrTimestamp, ErrSignature or ErrSecret.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, unix, err := checkCommon(secret, h, now, tolerance)
	if err != nil {
		return err
	}
	return match(h.Get(HeaderSignature), HeaderSignature, mac(secret, id, unix, body))
}

// VerifyRoute checks the fairrelay-signature header against the request's
// id, timestamp, flow and sequence number, with the same timestamp rules as
// Verify, and returns the flow (unescaped) and sequence number it vouches for.
// A malformed flow or seq header is ErrHeader. A receiver calls both Verify
// and VerifyRoute.
func VerifyRoute(secret []byte, h http.Header, now time.Time, tolerance time.Duration) (flow string, seq int64, err error) {
	id, unix, err := checkCommon(secret, h, now, tolerance)
	if err != nil {
		return "", 0, err
	}
	rawFlow, rawSeq := h.Get(HeaderFlow), h.Get(HeaderSeq)
	if rawFlow == "" || rawSeq == "" {
		return "", 0, fmt.Errorf("%w: %s and %s are required", ErrHeader, HeaderFlow, HeaderSeq)
	}
	flow, err = url.PathUnescape(rawFlow)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %s: %v", ErrHeader, HeaderFlow, err)
	}
	seq, err = strconv.ParseInt(rawSeq, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %s: %v", ErrHeader, HeaderSeq, err)
	}
	if err := match(h.Get(HeaderRoute), HeaderRoute, mac(secret, id, unix, routeContent(flow, seq))); err != nil {
		return "", 0, err
	}
	return flow, seq, nil
}

// checkCommon validates the secret, the id and the timestamp window.
func checkCommon(secret []byte, h http.Header, now time.Time, tolerance time.Duration) (string, int64, error) {
	if len(secret) == 0 {
		return "", 0, fmt.Errorf("%w: empty", ErrSecret)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	id := h.Get(HeaderID)
	if id == "" {
		return "", 0, fmt.Errorf("%w: %s missing", ErrSignature, HeaderID)
	}
	rawTS := h.Get(HeaderTimestamp)
	unix, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %s %q is not Unix seconds", ErrTimestamp, HeaderTimestamp, rawTS)
	}
	// Compare in seconds so that huge values cannot overflow a Duration.
	nowUnix, tol := now.Unix(), int64(tolerance/time.Second)
	if unix < nowUnix-tol || unix > nowUnix+tol {
		return "", 0, fmt.Errorf("%w: %s %d is more than %s from %d", ErrTimestamp, HeaderTimestamp, unix, tolerance, nowUnix)
	}
	return id, unix, nil
}

// match reports whether any "v1,<base64>" entry of header equals want.
func match(header, name string, want []byte) error {
	if header == "" {
		return fmt.Errorf("%w: %s missing", ErrSignature, name)
	}
	for entry := range strings.FieldsSeq(header) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrSignature, name)
}

func mac(secret []byte, id string, unix int64, content []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(content)
	return m.Sum(nil)
}

func routeContent(flow string, seq int64) []byte {
	b := append([]byte(flow), '.')
	return strconv.AppendInt(b, seq, 10)
}
