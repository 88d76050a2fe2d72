package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fairrelay/fairrelay/webhook"
)

// stdSign and stdVerify are an independent implementation of the Standard
// Webhooks specification, written from its text and not calling package
// webhook: the secret is "whsec_" + base64(key); the signature is
// "v1," + base64(HMAC-SHA256(key, "${id}.${timestamp}.${body}")); the
// webhook-signature header holds space-separated signatures, any v1 match
// verifying.
func stdKey(t *testing.T, secret string) []byte {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("std: secret %q: %v", secret, err)
	}
	return key
}

func stdSign(t *testing.T, secret, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, stdKey(t, secret))
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + string(body)))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// stdVerify verifies as a receiver whose HTTP stack hands it the header
// values as strings: read turns a header's bytes into the string the
// receiver signs (the identity for Go; Latin-1 for Node.js).
func stdVerify(t *testing.T, secret string, h http.Header, body []byte, read func(string) string) bool {
	id, ts := read(h.Get("webhook-id")), h.Get("webhook-timestamp")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	want := stdSign(t, secret, id, unix, body)
	for _, s := range strings.Split(h.Get("webhook-signature"), " ") {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func same(s string) string { return s }

// latin1 is how Node.js's HTTP parser reads a header value: each byte one
// character, then the string is UTF-8 encoded again to be signed.
func latin1(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		b = utf8.AppendRune(b, rune(s[i]))
	}
	return string(b)
}

// An independent implementation signs, ours verifies; ours signs, it
// verifies (with the reference secret, and for IDs of every kind).
func TestInteropIndependentImplementation(t *testing.T) {
	key, err := webhook.ParseSecret(refSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := stdSign(t, refSecret, refID, refUnix, []byte(refBody)); got != refSignature {
		t.Fatalf("the independent implementation misses the reference vector: %q", got)
	}
	now := time.Unix(refUnix, 0)
	for _, id := range []string{refID, "evt 7", "café-1", "注文/42", "UTF-8''x", "100%"} {
		// Theirs → ours.
		wire := webhook.EncodeID(id)
		h := http.Header{}
		h.Set(webhook.HeaderID, wire)
		h.Set(webhook.HeaderTimestamp, strconv.Itoa(refUnix))
		h.Set(webhook.HeaderSignature, stdSign(t, refSecret, wire, refUnix, []byte(refBody)))
		if err := webhook.Verify(key, h, []byte(refBody), now, 0); err != nil {
			t.Errorf("id %q: ours refuses the independent signature: %v", id, err)
		}
		// Ours → theirs, read as Go and as Node.js read headers.
		h = http.Header{}
		webhook.SetHeaders(h, key, id, "f", 1, now, []byte(refBody))
		for name, read := range map[string]func(string) string{"bytes": same, "latin-1": latin1} {
			if !stdVerify(t, refSecret, h, []byte(refBody), read) {
				t.Errorf("id %q: the independent implementation (%s) refuses our signature; webhook-id %q", id, name, h.Get(webhook.HeaderID))
			}
		}
		if got, err := webhook.DecodeID(h.Get(webhook.HeaderID)); err != nil || got != id {
			t.Errorf("DecodeID(%q) = %q, %v; want %q", h.Get(webhook.HeaderID), got, err, id)
		}
	}
	// Before EncodeID the raw UTF-8 ID went on the wire: a receiver that
	// reads header bytes as Latin-1 signed other bytes and refused it.
	h := http.Header{}
	h.Set(webhook.HeaderID, "café-1")
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(refUnix))
	h.Set(webhook.HeaderSignature, webhook.Sign(key, "café-1", now, []byte(refBody)))
	if stdVerify(t, refSecret, h, []byte(refBody), latin1) {
		t.Error("a raw UTF-8 webhook-id verifies under a Latin-1 reading: the test shows nothing")
	}
}

func TestEncodeID(t *testing.T) {
	for id, want := range map[string]string{
		"evt-1":      "evt-1",
		"a b/c:d#e%": "a b/c:d#e%",
		"café":       "UTF-8''caf%C3%A9",
		"UTF-8''x":   "UTF-8''UTF-8%27%27x",
		"tab\there":  "UTF-8''tab%09here",
	} {
		if got := webhook.EncodeID(id); got != want {
			t.Errorf("EncodeID(%q) = %q, want %q", id, got, want)
		}
		if got, err := webhook.DecodeID(want); err != nil || got != id {
			t.Errorf("DecodeID(%q) = %q, %v; want %q", want, got, err, id)
		}
	}
	for _, v := range []string{"café", "UTF-8''abc", "UTF-8''caf%c3%a9", "UTF-8''caf%C3%A", "UTF-8''caf%zz", "UTF-8''%41%C3%A9", "UTF-8''a b%C3%A9"} {
		if got, err := webhook.DecodeID(v); !errors.Is(err, webhook.ErrHeader) {
			t.Errorf("DecodeID(%q) = %q, %v; want ErrHeader (not EncodeID's one form)", v, got, err)
		}
	}
}

func FuzzEncodeID(f *testing.F) {
	f.Add("café")
	f.Add("UTF-8''%41")
	f.Fuzz(func(t *testing.T, id string) {
		wire := webhook.EncodeID(id)
		for i := 0; i < len(wire); i++ {
			if wire[i] < 0x20 || wire[i] > 0x7e {
				t.Fatalf("EncodeID(%q) = %q: not printable ASCII", id, wire)
			}
		}
		if got, err := webhook.DecodeID(wire); err != nil || got != id {
			t.Fatalf("DecodeID(EncodeID(%q)) = %q, %v", id, got, err)
		}
		// Any string DecodeID takes is EncodeID's one form of its ID.
		if got, err := webhook.DecodeID(id); err == nil && webhook.EncodeID(got) != id {
			t.Fatalf("DecodeID(%q) = %q, whose form is %q", id, got, webhook.EncodeID(got))
		}
	})
}

// The swap forgery. Before this change fairrelay-signature was
// "v1," + base64(HMAC-SHA256(secret, id.ts.flow.seq)): the very MAC of
// webhook-signature over a body "flow.seq". So from one genuine delivery
// (id, ts, flow, seq) an attacker built a second with the same id, ts, flow
// and seq, the body "flow.seq" and the genuine route signature copied into
// webhook-signature: both signatures verified, and a receiver whose effect
// takes any body applied the forged one. oldRoute below is that old route
// signature, and the test shows it verifying as a body signature; the
// current headers, swapped or re-split in every way, verify nothing.
func TestRouteSignatureSwapForgery(t *testing.T) {
	const id, flow, seq = "evt-9", "acct.7", int64(12)
	h := http.Header{}
	webhook.SetHeaders(h, secret, id, flow, seq, signAt, []byte(`{"delta": 3}`))

	forgedBody := []byte(flow + "." + strconv.FormatInt(seq, 10)) // "acct.7.12"
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id + "." + strconv.FormatInt(signAt.Unix(), 10) + "." + flow + "." + strconv.FormatInt(seq, 10)))
	oldRoute := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	old := h.Clone()
	old.Set(webhook.HeaderSignature, oldRoute)
	if err := webhook.Verify(secret, old, forgedBody, signAt, time.Minute); err != nil {
		t.Fatalf("the old route signature no longer verifies as a body signature (%v): the test shows nothing", err)
	}

	route := h.Get(webhook.HeaderRoute)
	body := h.Get(webhook.HeaderSignature)
	_, mac, _ := strings.Cut(route, ",")
	_, bodyMAC, _ := strings.Cut(body, ",")
	// The route signature as the body signature, in every version tag.
	for _, sig := range []string{route, "v1," + mac} {
		f := h.Clone()
		f.Set(webhook.HeaderSignature, sig)
		if err := webhook.Verify(secret, f, forgedBody, signAt, time.Minute); !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("route signature %q as webhook-signature over %q: %v, want ErrSignature", sig, forgedBody, err)
		}
	}
	// The body signature as the route signature.
	for _, sig := range []string{body, "v2," + bodyMAC} {
		f := h.Clone()
		f.Set(webhook.HeaderRoute, sig)
		if _, _, err := webhook.VerifyRoute(secret, f, signAt, time.Minute); !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("webhook-signature %q as fairrelay-signature: %v, want ErrSignature", sig, err)
		}
	}
	// A re-split of the same fields: flow "acct" seq 7 / ts moved into the
	// id, and so on: none verifies with the genuine route signature.
	for _, r := range []struct {
		id, flow, seq string
		ts            int64
	}{
		{id, "acct", "7", signAt.Unix()},
		{id + "." + strconv.FormatInt(signAt.Unix(), 10), "acct.7", "12", signAt.Unix()},
		{"evt", "acct.7", "12", signAt.Unix()},
	} {
		f := h.Clone()
		f.Set(webhook.HeaderID, r.id)
		f.Set(webhook.HeaderFlow, r.flow)
		f.Set(webhook.HeaderSeq, r.seq)
		if _, _, err := webhook.VerifyRoute(secret, f, signAt, time.Minute); !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("re-split %+v verifies: %v", r, err)
		}
	}
	// A sender of the old form is told why.
	f := h.Clone()
	f.Set(webhook.HeaderRoute, oldRoute)
	if _, _, err := webhook.VerifyRoute(secret, f, signAt, time.Minute); !errors.Is(err, webhook.ErrSignature) || !strings.Contains(err.Error(), "older fairrelay") {
		t.Errorf("VerifyRoute(old v1 route signature) = %v, want ErrSignature naming an older sender", err)
	}
}

// A rotation: signed with several secrets, verified with any one; a
// receiver that knows several accepts a sender that knows one.
func TestVerifyAnyRotation(t *testing.T) {
	oldKey, newKey, other := []byte("old-secret"), []byte("new-secret"), []byte("other")
	both := http.Header{}
	webhook.SetHeadersRotating(both, [][]byte{newKey, oldKey}, "e", "f", 1, signAt, body)
	onlyOld := http.Header{}
	webhook.SetHeaders(onlyOld, oldKey, "e", "f", 1, signAt, body)
	for name, c := range map[string]struct {
		h       http.Header
		secrets [][]byte
		ok      bool
	}{
		"signed with both, receiver knows old":          {both, [][]byte{oldKey}, true},
		"signed with both, receiver knows new":          {both, [][]byte{newKey}, true},
		"signed with old, receiver knows new and old":   {onlyOld, [][]byte{newKey, oldKey}, true},
		"signed with old, receiver knows new only":      {onlyOld, [][]byte{newKey}, false},
		"signed with both, receiver knows another only": {both, [][]byte{other}, false},
	} {
		err := webhook.VerifyAny(c.secrets, c.h, body, signAt, time.Minute)
		_, _, rerr := webhook.VerifyRouteAny(c.secrets, c.h, signAt, time.Minute)
		if c.ok != (err == nil) || c.ok != (rerr == nil) {
			t.Errorf("%s: VerifyAny = %v, VerifyRouteAny = %v; want ok=%v", name, err, rerr, c.ok)
		}
	}
	for _, bad := range [][][]byte{nil, {oldKey, nil}} {
		if err := webhook.VerifyAny(bad, both, body, signAt, 0); !errors.Is(err, webhook.ErrSecret) {
			t.Errorf("VerifyAny(%d secrets, one empty) = %v, want ErrSecret", len(bad), err)
		}
	}
}

// An unpadded whsec_ secret is the same key as its padded form: a party
// that writes it unpadded and one (such as the official Go library, which
// decodes strictly) that needs the padding sign and verify alike.
func TestUnpaddedSecretIsTheSameKey(t *testing.T) {
	for n := 1; n <= 40; n++ {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i*37 + n)
		}
		padded := "whsec_" + base64.StdEncoding.EncodeToString(raw)
		unpadded := strings.TrimRight(padded, "=")
		a, err := webhook.ParseSecret(padded)
		if err != nil {
			t.Fatalf("%d bytes, padded: %v", n, err)
		}
		b, err := webhook.ParseSecret(unpadded)
		if err != nil || string(a) != string(raw) || string(b) != string(raw) {
			t.Fatalf("%d bytes: padded %x, unpadded %x (%v); want %x", n, a, b, err, raw)
		}
		h := http.Header{}
		h.Set(webhook.HeaderID, "e")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(signAt.Unix(), 10))
		h.Set(webhook.HeaderSignature, stdSign(t, padded, "e", signAt.Unix(), body))
		if err := webhook.Verify(b, h, body, signAt, 0); err != nil {
			t.Fatalf("%d bytes: the padded party's signature does not verify with the unpadded secret: %v", n, err)
		}
	}
}
