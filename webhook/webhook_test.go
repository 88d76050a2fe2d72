package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/webhook"
)

// The Standard Webhooks reference vector (the convention's own libraries test
// against it): secret, message ID, timestamp, payload and signature.
const (
	refSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	refID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	refUnix      = 1614265330
	refBody      = `{"test": 2432232314}`
	refSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var (
	secret = []byte("shared-secret-0123456789")
	signAt = time.Unix(1_700_000_000, 0)
	body   = []byte(`{"op":"set","value":7}`)
)

func signed(t *testing.T) http.Header {
	t.Helper()
	h := http.Header{}
	webhook.SetHeaders(h, secret, "evt-1", "tenant/α b", 42, signAt, body)
	return h
}

func TestSignReferenceVector(t *testing.T) {
	key, err := webhook.ParseSecret(refSecret)
	if err != nil {
		t.Fatalf("ParseSecret() error = %v", err)
	}
	if got := webhook.Sign(key, refID, time.Unix(refUnix, 0), []byte(refBody)); got != refSignature {
		t.Fatalf("Sign() = %q, want %q", got, refSignature)
	}
	h := http.Header{}
	h.Set(webhook.HeaderID, refID)
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(refUnix))
	h.Set(webhook.HeaderSignature, refSignature)
	if err := webhook.Verify(key, h, []byte(refBody), time.Unix(refUnix+10, 0), 0); err != nil {
		t.Fatalf("Verify(reference) error = %v", err)
	}
}

func TestVerifyAccepts(t *testing.T) {
	h := signed(t)
	if err := webhook.Verify(secret, h, body, signAt, time.Minute); err != nil {
		t.Fatalf("Verify() error = %v", err)
	}
	flow, seq, err := webhook.VerifyRoute(secret, h, signAt, time.Minute)
	if err != nil {
		t.Fatalf("VerifyRoute() error = %v", err)
	}
	if flow != "tenant/α b" || seq != 42 {
		t.Fatalf("VerifyRoute() = %q, %d, want %q, 42", flow, seq, "tenant/α b")
	}
	if got := h.Get(webhook.HeaderIdempotencyKey); got != "evt-1" {
		t.Fatalf("Idempotency-Key = %q, want evt-1", got)
	}
	if got := h.Get(webhook.HeaderFlow); strings.ContainsAny(got, "/ ") {
		t.Fatalf("flow header %q is not path-escaped", got)
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h http.Header) []byte
		route  bool // the tampering is only visible to VerifyRoute
	}{
		{"body", func(http.Header) []byte { return []byte(`{"op":"set","value":8}`) }, false},
		{"empty body", func(http.Header) []byte { return nil }, false},
		{"id", func(h http.Header) []byte { h.Set(webhook.HeaderID, "evt-2"); return body }, false},
		{"timestamp within window", func(h http.Header) []byte {
			h.Set(webhook.HeaderTimestamp, strconv.FormatInt(signAt.Unix()+1, 10))
			return body
		}, false},
		{"flow", func(h http.Header) []byte { h.Set(webhook.HeaderFlow, "tenant%2Fb"); return body }, true},
		{"seq", func(h http.Header) []byte { h.Set(webhook.HeaderSeq, "43"); return body }, true},
		{"signature bytes", func(h http.Header) []byte {
			s := h.Get(webhook.HeaderSignature)
			h.Set(webhook.HeaderSignature, s[:len(s)-2]+"A=")
			return body
		}, false},
		{"signature version", func(h http.Header) []byte {
			h.Set(webhook.HeaderSignature, "v2,"+strings.TrimPrefix(h.Get(webhook.HeaderSignature), "v1,"))
			return body
		}, false},
		{"signature missing", func(h http.Header) []byte { h.Del(webhook.HeaderSignature); return body }, false},
		{"route signature missing", func(h http.Header) []byte { h.Del(webhook.HeaderRoute); return body }, true},
		{"id missing", func(h http.Header) []byte { h.Del(webhook.HeaderID); return body }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := signed(t)
			b := tt.mutate(h)
			err := webhook.Verify(secret, h, b, signAt, time.Minute)
			if !tt.route && !errors.Is(err, webhook.ErrSignature) {
				t.Fatalf("Verify() error = %v, want ErrSignature", err)
			}
			if tt.route && err != nil {
				t.Fatalf("Verify() error = %v, want nil (the body signature does not cover %s)", err, tt.name)
			}
			_, _, err = webhook.VerifyRoute(secret, h, signAt, time.Minute)
			if (tt.route || tt.name == "id" || tt.name == "timestamp within window" || tt.name == "id missing") && !errors.Is(err, webhook.ErrSignature) {
				t.Fatalf("VerifyRoute() error = %v, want ErrSignature", err)
			}
		})
	}
}

func TestVerifyWrongSecret(t *testing.T) {
	h := signed(t)
	other := []byte("another-secret")
	if err := webhook.Verify(other, h, body, signAt, 0); !errors.Is(err, webhook.ErrSignature) {
		t.Fatalf("Verify(wrong secret) error = %v, want ErrSignature", err)
	}
	if _, _, err := webhook.VerifyRoute(other, h, signAt, 0); !errors.Is(err, webhook.ErrSignature) {
		t.Fatalf("VerifyRoute(wrong secret) error = %v, want ErrSignature", err)
	}
	if err := webhook.Verify(nil, h, body, signAt, 0); !errors.Is(err, webhook.ErrSecret) {
		t.Fatalf("Verify(empty secret) error = %v, want ErrSecret", err)
	}
}

func TestVerifyTimestampWindow(t *testing.T) {
	tests := []struct {
		name string
		now  time.Time
		tol  time.Duration
		ok   bool
	}{
		{"exact", signAt, time.Minute, true},
		{"old edge", signAt.Add(time.Minute), time.Minute, true},
		{"future edge", signAt.Add(-time.Minute), time.Minute, true},
		{"too old", signAt.Add(time.Minute + time.Second), time.Minute, false},
		{"in the future", signAt.Add(-time.Minute - time.Second), time.Minute, false},
		{"default tolerance keeps 5 min", signAt.Add(5 * time.Minute), 0, true},
		{"default tolerance refuses 5 min 1 s", signAt.Add(5*time.Minute + time.Second), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := signed(t)
			err := webhook.Verify(secret, h, body, tt.now, tt.tol)
			_, _, rerr := webhook.VerifyRoute(secret, h, tt.now, tt.tol)
			if tt.ok && (err != nil || rerr != nil) {
				t.Fatalf("Verify() = %v, VerifyRoute() = %v, want nil", err, rerr)
			}
			if !tt.ok && (!errors.Is(err, webhook.ErrTimestamp) || !errors.Is(rerr, webhook.ErrTimestamp)) {
				t.Fatalf("Verify() = %v, VerifyRoute() = %v, want ErrTimestamp", err, rerr)
			}
		})
	}
	for _, raw := range []string{"", "abc", "1.5", "99999999999999999999", "-9223372036854775808"} {
		h := signed(t)
		h.Set(webhook.HeaderTimestamp, raw)
		if err := webhook.Verify(secret, h, body, signAt, time.Minute); !errors.Is(err, webhook.ErrTimestamp) {
			t.Errorf("Verify(timestamp %q) error = %v, want ErrTimestamp", raw, err)
		}
	}
}

func TestVerifyMultipleSignatures(t *testing.T) {
	h := signed(t)
	good := h.Get(webhook.HeaderSignature)
	wrong := webhook.Sign([]byte("old-secret"), "evt-1", signAt, body)
	for _, header := range []string{
		wrong + " " + good,
		good + " " + wrong,
		"v1a,c29tZXRoaW5n " + good,
		"garbage v1,%%% " + good,
		wrong + "  " + good, // the standard separates with spaces; extra ones are tolerated
	} {
		h.Set(webhook.HeaderSignature, header)
		if err := webhook.Verify(secret, h, body, signAt, time.Minute); err != nil {
			t.Errorf("Verify(%q) error = %v, want nil", header, err)
		}
	}
	h.Set(webhook.HeaderSignature, wrong+" "+webhook.Sign([]byte("older"), "evt-1", signAt, body))
	if err := webhook.Verify(secret, h, body, signAt, time.Minute); !errors.Is(err, webhook.ErrSignature) {
		t.Fatalf("Verify(no match among two) error = %v, want ErrSignature", err)
	}
}

func TestVerifyRouteMalformed(t *testing.T) {
	for _, tt := range []struct{ header, value string }{
		{webhook.HeaderFlow, "bad%zz"},
		{webhook.HeaderFlow, ""},
		{webhook.HeaderSeq, "x"},
		{webhook.HeaderSeq, ""},
	} {
		h := signed(t)
		h.Set(tt.header, tt.value)
		if _, _, err := webhook.VerifyRoute(secret, h, signAt, time.Minute); !errors.Is(err, webhook.ErrHeader) {
			t.Errorf("VerifyRoute(%s=%q) error = %v, want ErrHeader", tt.header, tt.value, err)
		}
	}
}

func TestParseSecret(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{"plain", "plain", nil},
		{"whsec_c2VjcmV0", "secret", nil},
		{"whsec_c2VjcmV0MQ==", "secret1", nil},
		{"whsec_c2VjcmV0MQ", "secret1", nil}, // unpadded, as some implementations write it
		{"whsec_c2VjcmV0MTI=", "secret12", nil},
		{"whsec_c2VjcmV0MTI", "secret12", nil},
		{"whsec_c2VjcmV0MQ=", "", webhook.ErrSecret}, // padding, but wrong
		{"whsec_c", "", webhook.ErrSecret},
		{"whsec_", "", webhook.ErrSecret},
		{"whsec_!!!", "", webhook.ErrSecret},
		{"", "", webhook.ErrSecret},
	}
	for _, tt := range tests {
		got, err := webhook.ParseSecret(tt.in)
		if !errors.Is(err, tt.err) || string(got) != tt.want {
			t.Errorf("ParseSecret(%q) = %q, %v, want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("evt-1", "flow", int64(3), []byte("body"), "v1,abc", "1700000000")
	f.Add("", "", int64(-1), []byte{}, "", "")
	f.Fuzz(func(t *testing.T, id, flow string, seq int64, b []byte, sigHeader, ts string) {
		h := http.Header{}
		webhook.SetHeaders(h, secret, id, flow, seq, signAt, b)
		if id != "" {
			if err := webhook.Verify(secret, h, b, signAt, time.Minute); err != nil {
				t.Fatalf("Verify(own signature) error = %v", err)
			}
			if gotFlow, gotSeq, err := webhook.VerifyRoute(secret, h, signAt, time.Minute); flow != "" && (err != nil || gotFlow != flow || gotSeq != seq) {
				t.Fatalf("VerifyRoute(own signature) = %q, %d, %v", gotFlow, gotSeq, err)
			}
		}
		// Arbitrary headers never panic and never verify by accident.
		h.Set(webhook.HeaderSignature, sigHeader)
		h.Set(webhook.HeaderTimestamp, ts)
		if err := webhook.Verify(secret, h, b, signAt, time.Minute); err == nil && sigHeader != webhook.Sign(secret, id, signAt, b) && !strings.Contains(sigHeader, webhook.Sign(secret, id, signAt, b)) {
			t.Fatalf("Verify(arbitrary %q) accepted", sigHeader)
		}
	})
}

func TestWaveHeader(t *testing.T) {
	if id, n, ok := webhook.ParseWave(webhook.FormatWave("a1b2-7", 16)); !ok || id != "a1b2-7" || n != 16 {
		t.Fatalf("webhook.ParseWave(FormatWave) = %q, %d, %v", id, n, ok)
	}
	for _, v := range []string{"", "/3", "x/", "x/0", "x/-1", "x/+3", "x/1048577", "x y/3", "x/3/", "a/b/3", "x\x7f/2", strings.Repeat("x", webhook.MaxWaveID+1) + "/2"} {
		if id, n, ok := webhook.ParseWave(v); ok {
			t.Errorf("webhook.ParseWave(%q) = %q, %d, true; want not ok", v, id, n)
		}
	}
	if _, _, ok := webhook.ParseWave(strings.Repeat("x", webhook.MaxWaveID) + "/1048576"); !ok {
		t.Error("the longest id and the largest size are refused")
	}
}
