package receiver

import (
	"errors"
	"testing"
)

func TestParseDelta(t *testing.T) {
	for body, want := range map[string]int64{`{"delta": 5}`: 5, " {\"delta\":1000}\n": 1000, `{"delta":1}`: 1} {
		if got, err := ParseDelta([]byte(body)); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", body, got, err, want)
		}
	}
	for _, body := range []string{``, `{}`, `{"delta": 0}`, `{"delta": 1001}`, `{"delta": 1.0}`, `{"delta": 1e2}`,
		`{"delta": 1, "x": 2}`, `{"delta": 01}`, `{"delta": 1} x`, `{"d\u0065lta": 1}`, `{"delta": -5}`} {
		if _, err := ParseDelta([]byte(body)); !errors.Is(err, ErrInvalidBody) {
			t.Errorf("%q: %v, want ErrInvalidBody", body, err)
		}
	}
}

func TestValidateOrder(t *testing.T) {
	// The body is checked first: a bad body with a bad ID is ErrInvalidBody.
	if _, err := Validate(Message{ID: "", Flow: "f", Seq: 0, Body: []byte("x")}); !errors.Is(err, ErrInvalidBody) {
		t.Fatalf("got %v", err)
	}
	for _, m := range []Message{
		{ID: "", Flow: "f", Seq: 1},
		{ID: "a", Flow: "f\n", Seq: 1},
		{ID: "a", Flow: "f", Seq: 0},
	} {
		m.Body = []byte(`{"delta": 1}`)
		if _, err := Validate(m); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", m, err)
		}
	}
}
