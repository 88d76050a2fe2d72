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
	// HeaderID carries the event ID (the standard's message ID), in the
	// form of EncodeID.
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
	// HeaderRoute carries the signature that binds flow and sequence number
	// to the id and timestamp: one "v2,<base64>" entry per secret (see
	// SignRoute).
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
// standard base64, with or without its trailing '=' padding (some
// implementations write it unpadded); any other string is used as is. An
// empty secret, or an empty or undecodable whsec_ payload, is ErrSecret.
func ParseSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil && !strings.HasSuffix(rest, "=") {
			key, err = base64.RawStdEncoding.DecodeString(rest)
		}
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

// SignRoute returns the fairrelay-signature value binding flow and seq to
// the request's id and timestamp: "v2," + base64(HMAC-SHA256(routeKey,
// ns(id) + ns(unix seconds) + ns(flow) + ns(seq))), where routeKey is
// HMAC-SHA256(secret, "fairrelay-signature route key v2") and ns(x) is the
// netstring len(x) + ":" + x + "," (decimal byte length). id is the
// webhook-id header's value (EncodeID); the flow is signed raw, not
// escaped; seq in decimal.
//
// The derived key keeps the two signatures apart (no body signature is ever
// a route signature, nor the reverse: the old v1 route signature, over
// id.ts.flow.seq with the secret itself, could be replayed as the body
// signature of a body "flow.seq"), and the netstrings make the split of the
// fields unambiguous.
func SignRoute(secret []byte, id string, ts time.Time, flow string, seq int64) string {
	return routeVersion + "," + base64.StdEncoding.EncodeToString(routeMAC(secret, id, ts.Unix(), flow, seq))
}

// SetHeaders sets every header of a delivery on h: the three standard ones,
// the idempotency key, flow, sequence number and the route signature, all
// signed at ts. The ID goes in webhook-id and Idempotency-Key as
// EncodeID(id), and the signatures cover that form.
func SetHeaders(h http.Header, secret []byte, id, flow string, seq int64, ts time.Time, body []byte) {
	SetHeadersRotating(h, [][]byte{secret}, id, flow, seq, ts, body)
}

// SetHeadersRotating is SetHeaders signing with several secrets at once, as
// Standard Webhooks allows during a secret rotation: each signature header
// carries one space-separated "v1," entry per secret, in the order given,
// and a receiver that knows any one of the secrets verifies the request.
// secrets must not be empty.
func SetHeadersRotating(h http.Header, secrets [][]byte, id, flow string, seq int64, ts time.Time, body []byte) {
	wireID := EncodeID(id)
	sig := make([]string, len(secrets))
	route := make([]string, len(secrets))
	for i, s := range secrets {
		sig[i] = Sign(s, wireID, ts, body)
		route[i] = SignRoute(s, wireID, ts, flow, seq)
	}
	h.Set(HeaderID, wireID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sig, " "))
	h.Set(HeaderIdempotencyKey, wireID)
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
	return VerifyAny([][]byte{secret}, h, body, now, tolerance)
}

// VerifyAny is Verify for a receiver that knows several secrets (a
// rotation): the request verifies when a signature matches any one of them.
// secrets must not be empty, nor any secret in it.
func VerifyAny(secrets [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, unix, err := checkCommon(secrets, h, now, tolerance)
	if err != nil {
		return err
	}
	want := make([][]byte, len(secrets))
	for i, s := range secrets {
		want[i] = mac(s, id, unix, body)
	}
	return match(h.Get(HeaderSignature), HeaderSignature, "v1", want)
}

// VerifyRoute checks the fairrelay-signature header against the request's
// id, timestamp, flow and sequence number, with the same timestamp rules as
// Verify, and returns the flow (unescaped) and sequence number it vouches for.
// A malformed flow or seq header is ErrHeader; a route signature of the
// retired v1 form only is ErrSignature (see SignRoute). A receiver calls
// both Verify and VerifyRoute.
func VerifyRoute(secret []byte, h http.Header, now time.Time, tolerance time.Duration) (flow string, seq int64, err error) {
	return VerifyRouteAny([][]byte{secret}, h, now, tolerance)
}

// VerifyRouteAny is VerifyRoute for a receiver that knows several secrets:
// the route verifies when a signature matches any one of them.
func VerifyRouteAny(secrets [][]byte, h http.Header, now time.Time, tolerance time.Duration) (flow string, seq int64, err error) {
	id, unix, err := checkCommon(secrets, h, now, tolerance)
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
	want := make([][]byte, len(secrets))
	for i, s := range secrets {
		want[i] = routeMAC(s, id, unix, flow, seq)
	}
	if err := match(h.Get(HeaderRoute), HeaderRoute, routeVersion, want); err != nil {
		return "", 0, err
	}
	return flow, seq, nil
}

// checkCommon validates the secret, the id and the timestamp window.
func checkCommon(secrets [][]byte, h http.Header, now time.Time, tolerance time.Duration) (string, int64, error) {
	if len(secrets) == 0 {
		return "", 0, fmt.Errorf("%w: none", ErrSecret)
	}
	for _, s := range secrets {
		if len(s) == 0 {
			return "", 0, fmt.Errorf("%w: empty", ErrSecret)
		}
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

// match reports whether any "<version>,<base64>" entry of header equals
// one of want.
func match(header, name, version string, want [][]byte) error {
	if header == "" {
		return fmt.Errorf("%w: %s missing", ErrSignature, name)
	}
	retired, current := false, false
	for entry := range strings.FieldsSeq(header) {
		v, sig, ok := strings.Cut(entry, ",")
		if !ok || v != version {
			retired = retired || (v == "v1" && name == HeaderRoute)
			continue
		}
		current = true
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return nil
			}
		}
	}
	if retired && !current {
		return fmt.Errorf("%w: %s has only v1 entries, a form no longer accepted (the sender is an older fairrelay: upgrade it)", ErrSignature, name)
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

// routeVersion is the version tag of fairrelay-signature entries.
const routeVersion = "v2"

// routeKeyLabel derives the route signature's key from the secret.
const routeKeyLabel = "fairrelay-signature route key v2"

func routeMAC(secret []byte, id string, unix int64, flow string, seq int64) []byte {
	k := hmac.New(sha256.New, secret)
	k.Write([]byte(routeKeyLabel))
	m := hmac.New(sha256.New, k.Sum(nil))
	for _, field := range []string{id, strconv.FormatInt(unix, 10), flow, strconv.FormatInt(seq, 10)} {
		m.Write(strconv.AppendInt(nil, int64(len(field)), 10))
		m.Write([]byte{':'})
		m.Write([]byte(field))
		m.Write([]byte{','})
	}
	return m.Sum(nil)
}

// idPrefix marks a webhook-id in the encoded form of EncodeID (the
// ext-value form of RFC 8187).
const idPrefix = "UTF-8''"

// EncodeID returns the form in which an event ID travels in webhook-id (and
// Idempotency-Key), and which the signatures cover: the ID itself when it
// is printable ASCII (0x20 to 0x7E) and does not begin with the prefix
// UTF-8 and two apostrophes; otherwise that prefix followed by the ID's
// bytes percent-encoded (every byte but ALPHA, DIGIT and !#$&+-.^_`|~ as
// %XX, upper-case hex: the ext-value of RFC 8187), as in:
//
//	café → UTF-8''caf%C3%A9
//
// HTTP stacks read header bytes above 0x7F differently (Node.js reads them
// as Latin-1, for one), so a raw UTF-8 ID would verify in some receivers
// and not in others; an ASCII header reads the same everywhere, so a
// receiver on the official Standard Webhooks libraries verifies it, and
// sees the encoded form as the message ID. DecodeID is the inverse.
func EncodeID(id string) string {
	if !needsEncoding(id) {
		return id
	}
	const hex = "0123456789ABCDEF"
	b := []byte(idPrefix)
	for i := 0; i < len(id); i++ {
		if c := id[i]; attrChar(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// DecodeID returns the event ID a webhook-id header carries (EncodeID's
// inverse). A value that EncodeID cannot have written (bytes outside
// printable ASCII, a bad or lower-case escape, an escape of a character
// that is sent as it is, or the encoded form of an ID that needs none) is
// ErrHeader, so that each ID has exactly one form on the wire.
func DecodeID(v string) (string, error) {
	rest, ok := strings.CutPrefix(v, idPrefix)
	if !ok {
		if needsEncoding(v) {
			return "", fmt.Errorf("%w: %s holds bytes outside printable ASCII", ErrHeader, HeaderID)
		}
		return v, nil
	}
	b := make([]byte, 0, len(rest))
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(rest) {
			return "", fmt.Errorf("%w: %s: unfinished escape", ErrHeader, HeaderID)
		}
		n, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: %s: bad escape %q", ErrHeader, HeaderID, rest[i:i+3])
		}
		b = append(b, byte(n))
		i += 2
	}
	id := string(b)
	if EncodeID(id) != v {
		return "", fmt.Errorf("%w: %s %q is not in its one encoded form", ErrHeader, HeaderID, v)
	}
	return id, nil
}

// needsEncoding reports whether id cannot travel as it is.
func needsEncoding(id string) bool {
	if strings.HasPrefix(id, idPrefix) {
		return true
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return true
		}
	}
	return false
}

// attrChar is RFC 8187's attr-char: the bytes an encoded ID carries as they are.
func attrChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}
