package receiver

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseDelta(t *testing.T) {
	for body, want := range map[string]int64{`{"delta": 5}`: 5, " {\"delta\":1000}\n": 1000, `{"delta":1}`: 1, "\t\r\n{ \"delta\" :\n42 } \n": 42} {
		if got, err := ParseDelta([]byte(body)); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", body, got, err, want)
		}
	}
}

// TestParseDeltaRules: one row per rule (and more for the rules whose cases
// differ), each refusal a *BodyError with that rule wrapping ErrInvalidBody.
func TestParseDeltaRules(t *testing.T) {
	rows := []struct {
		body string
		rule BodyRule
	}{
		{`{"delta":1}` + strings.Repeat(" ", MaxBodyLen), BodyTooLarge},
		{``, BodyNotJSON},
		{`   `, BodyNotJSON},
		{`{"delta": 1`, BodyNotJSON},
		{`{"delta": 01}`, BodyNotJSON},
		{`{delta: 1}`, BodyNotJSON},
		{`{"delta": 1,}`, BodyNotJSON},
		{"{\"delta\": 1, \"x\": \"\xff\"}", BodyNotJSON},
		{"{\"x\": \"a\nb\", \"delta\": 1}", BodyNotJSON},
		{`{"x": ` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, BodyNotJSON},
		{`{"delta": tru}`, BodyNotJSON},
		{`{"delta": 1} x`, BodyTrailingData},
		{`{"delta": 1}{"delta": 1}`, BodyTrailingData},
		{`{"delta": 1.5} x`, BodyTrailingData},
		{`[{"delta": 1}]`, BodyNotAnObject},
		{`5`, BodyNotAnObject},
		{`"{\"delta\": 1}"`, BodyNotAnObject},
		{`null`, BodyNotAnObject},
		{`{"delta": 1, "delta": 1}`, BodyDuplicateField},
		{`{"delta": 1, "d\u0065lta": 2}`, BodyDuplicateField},
		{`{"delta": 1, "x": 2}`, BodyUnknownField},
		{`{"x": 2}`, BodyUnknownField},
		{`{"Delta": 2}`, BodyUnknownField},
		{`{"d\u0065lta": 1}`, BodyEscapedName},
		{`{}`, BodyMissingDelta},
		{`{"delta": 1.5}`, BodyNotAnInteger},
		{`{"delta": 1.0}`, BodyNotAnInteger},
		{`{"delta": 1e3}`, BodyNotAnInteger},
		{`{"delta": 1E2}`, BodyNotAnInteger},
		{`{"delta": "3"}`, BodyNotAnInteger},
		{`{"delta": null}`, BodyNotAnInteger},
		{`{"delta": true}`, BodyNotAnInteger},
		{`{"delta": [1]}`, BodyNotAnInteger},
		{`{"delta": {"n": 1}}`, BodyNotAnInteger},
		{`{"delta": 0}`, BodyDeltaOutOfRange},
		{`{"delta": -0}`, BodyDeltaOutOfRange},
		{`{"delta": -5}`, BodyDeltaOutOfRange},
		{`{"delta": 1001}`, BodyDeltaOutOfRange},
		{`{"delta": 1000000}`, BodyDeltaOutOfRange},
		{`{"delta": 99999999999999999999999}`, BodyDeltaOutOfRange},
	}
	covered := map[BodyRule]bool{}
	for _, r := range rows {
		n, err := ParseDelta([]byte(r.body))
		be, ok := errors.AsType[*BodyError](err)
		if !ok || be.Rule != r.rule || !errors.Is(err, ErrInvalidBody) {
			t.Errorf("ParseDelta(%q) = %d, %v; want a *BodyError with rule %s wrapping ErrInvalidBody", r.body, n, err, r.rule)
			continue
		}
		if got, ok := BodyRuleOf(fmt.Errorf("context: %w", err)); !ok || got != r.rule {
			t.Errorf("BodyRuleOf(wrapped %v) = %s, %v", err, got, ok)
		}
		if !strings.HasPrefix(err.Error(), "receiverstore: invalid body: "+string(r.rule)+": ") {
			t.Errorf("ParseDelta(%q) error text %q does not name the rule", r.body, err)
		}
		covered[r.rule] = true
	}
	for _, rule := range BodyRules() {
		if !covered[rule] && rule != BodyEffectRefused && rule != BodyEmpty {
			t.Errorf("rule %s has no row", rule)
		}
	}
	// A store with an effect checks only the length.
	for b, rule := range map[string]BodyRule{"": BodyEmpty, strings.Repeat("x", MaxEffectBodyLen+1): BodyTooLarge} {
		if got, ok := BodyRuleOf(CheckEffectBody([]byte(b))); !ok || got != rule {
			t.Errorf("CheckEffectBody(%d bytes) rule = %s, %v; want %s", len(b), got, ok, rule)
		}
	}
	if err := CheckEffectBody([]byte("not json at all")); err != nil {
		t.Errorf("CheckEffectBody(any bytes) = %v", err)
	}
	// An effect's own refusal has no BodyError: it is effect_refused.
	if got, ok := BodyRuleOf(fmt.Errorf("price missing: %w", ErrInvalidBody)); !ok || got != BodyEffectRefused {
		t.Errorf("BodyRuleOf(plain ErrInvalidBody) = %s, %v; want effect_refused", got, ok)
	}
	if _, ok := BodyRuleOf(ErrInvalid); ok {
		t.Error("BodyRuleOf(ErrInvalid) is ok")
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

func FuzzParseDelta(f *testing.F) {
	for _, s := range []string{`{"delta": 5}`, `{"delta": 1.5}`, `{"x":[1,{"y":"\u0041"}]}`, `{"delta":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseDelta(b)
		if err == nil {
			if n < 1 || n > DefaultMaxDelta {
				t.Fatalf("ParseDelta(%q) = %d", b, n)
			}
			return
		}
		if _, ok := errors.AsType[*BodyError](err); !ok || !errors.Is(err, ErrInvalidBody) {
			t.Fatalf("ParseDelta(%q) error %v is not a *BodyError", b, err)
		}
	})
}

// TestOutcome_Applied: a sender counts accepted, duplicate and pruned as
// delivered (docs/contract.md §3, §7.9), and nothing else.
func TestOutcome_Applied(t *testing.T) {
	for o, want := range map[Outcome]bool{
		Accepted: true, Duplicate: true, Pruned: true,
		Conflict: false, Gap: false, UnsupportedDelta: false, "": false,
	} {
		if got := o.Applied(); got != want {
			t.Errorf("%q.Applied() = %v, want %v", o, got, want)
		}
	}
}
