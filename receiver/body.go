package receiver

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxBodyLen is the largest body, in bytes, that Receive reads. A longer
// body is [ErrInvalidBody].
const MaxBodyLen = 4096

// BodyRule names the rule of the body grammar that a refused body broke. A
// refusal is a [*BodyError] with its rule; it wraps [ErrInvalidBody]. The
// receiver server sends the rule in its 400 answer (docs/receiver-server.md).
type BodyRule string

// The body rules, in the order [ParseDelta] checks them: a body that breaks
// several is refused with the first.
const (
	// BodyTooLarge: more than MaxBodyLen bytes (for a store with an
	// effect, more than MaxEffectBodyLen bytes; see CheckEffectBody).
	BodyTooLarge BodyRule = "body_too_large"
	// BodyNotJSON: the body does not begin with one well-formed JSON value
	// (RFC 8259): empty, truncated, misspelled, a leading zero (01), a
	// control character or invalid UTF-8 inside a string, nesting deeper
	// than 64.
	BodyNotJSON BodyRule = "not_json"
	// BodyTrailingData: bytes other than JSON whitespace after that value.
	BodyTrailingData BodyRule = "trailing_data"
	// BodyNotAnObject: the value is an array, a string, a number, true,
	// false or null.
	BodyNotAnObject BodyRule = "not_an_object"
	// BodyDuplicateField: a member name appears twice (names compared after
	// their escapes are decoded).
	BodyDuplicateField BodyRule = "duplicate_field"
	// BodyUnknownField: a member other than "delta".
	BodyUnknownField BodyRule = "unknown_field"
	// BodyEscapedName: the member name "delta" is written with an escape
	// ("d\u0065lta"); the grammar wants it spelled plainly.
	BodyEscapedName BodyRule = "escaped_name"
	// BodyMissingDelta: the object has no member at all ({}).
	BodyMissingDelta BodyRule = "missing_delta"
	// BodyNotAnInteger: the value of "delta" is not a JSON integer token: a
	// fraction or an exponent (1.5, 1.0, 1e3), a string ("3"), true, false,
	// null, an array or an object.
	BodyNotAnInteger BodyRule = "not_an_integer"
	// BodyDeltaOutOfRange: an integer outside 1..DefaultMaxDelta (0, -5,
	// 1001, 99999999999999999999). A delta inside that range but above a
	// store's lower cap is not a refusal: it is the outcome
	// UnsupportedDelta.
	BodyDeltaOutOfRange BodyRule = "delta_out_of_range"
	// BodyEmpty: a store with an effect got an empty body (see
	// CheckEffectBody; without an effect an empty body is not_json).
	BodyEmpty BodyRule = "empty_body"
	// BodyEffectRefused: a store's user effect refused the body (its error
	// wraps ErrInvalidBody without a BodyError of its own).
	BodyEffectRefused BodyRule = "effect_refused"
)

// CheckEffectBody is the only check of a body that a store running a
// user's effect makes: 1 to MaxEffectBodyLen bytes, any bytes. A refusal
// is a [*BodyError] (BodyEmpty or BodyTooLarge) wrapping ErrInvalidBody.
func CheckEffectBody(b []byte) error {
	switch {
	case len(b) == 0:
		return bodyErr(BodyEmpty, "0 bytes, want 1..%d", MaxEffectBodyLen)
	case len(b) > MaxEffectBodyLen:
		return bodyErr(BodyTooLarge, "%d bytes, more than %d", len(b), MaxEffectBodyLen)
	}
	return nil
}

// BodyRules returns every rule, in the order ParseDelta checks them (then
// the effect store's BodyEmpty and BodyEffectRefused): a bounded set, fit
// for a metric label.
func BodyRules() []BodyRule {
	return []BodyRule{BodyTooLarge, BodyNotJSON, BodyTrailingData, BodyNotAnObject, BodyDuplicateField,
		BodyUnknownField, BodyEscapedName, BodyMissingDelta, BodyNotAnInteger, BodyDeltaOutOfRange,
		BodyEmpty, BodyEffectRefused}
}

// BodyError is a refused body: the rule it broke and, in words, where. It
// wraps [ErrInvalidBody], so errors.Is(err, ErrInvalidBody) holds; read the
// rule with [BodyRuleOf] (or errors.As).
type BodyError struct {
	Rule   BodyRule
	Detail string // words for a person: what was found, and at which byte
}

// Error is "receiverstore: invalid body: <rule>: <detail>".
func (e *BodyError) Error() string {
	return ErrInvalidBody.Error() + ": " + string(e.Rule) + ": " + e.Detail
}

// Unwrap returns ErrInvalidBody.
func (e *BodyError) Unwrap() error { return ErrInvalidBody }

// BodyRuleOf returns the rule of a refused body: the rule of the
// [*BodyError] in err's chain, else BodyEffectRefused for any other error
// wrapping ErrInvalidBody (a user effect's refusal). ok is false when err
// does not wrap ErrInvalidBody.
func BodyRuleOf(err error) (rule BodyRule, ok bool) {
	if be, ok := errors.AsType[*BodyError](err); ok {
		return be.Rule, true
	}
	if errors.Is(err, ErrInvalidBody) {
		return BodyEffectRefused, true
	}
	return "", false
}

func bodyErr(rule BodyRule, format string, args ...any) error {
	return &BodyError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// ParseDelta reads a body of the exact form {"delta": N} and returns N.
//
// The grammar is a strict subset of JSON (RFC 8259), byte for byte:
//
//	body  = ws "{" ws %s"\"delta\"" ws ":" ws int ws "}" ws
//	int   = ["-"] ("0" / %x31-39 *DIGIT)
//	ws    = *(%x20 / %x09 / %x0A / %x0D)
//
// So the object has exactly one member, spelled "delta" without escapes; its
// value is a JSON integer token (no fraction, no exponent: 1.0 and 1e2 are
// refused even though they denote integers); nothing but whitespace may
// follow the object. N must lie in 1..1000. Every refusal is a [*BodyError]
// naming the first [BodyRule] the body breaks, in the order of the rules'
// declaration; it wraps [ErrInvalidBody].
func ParseDelta(b []byte) (int64, error) {
	if len(b) > MaxBodyLen {
		return 0, bodyErr(BodyTooLarge, "%d bytes, more than %d", len(b), MaxBodyLen)
	}
	p := scanner{b: b}
	p.ws()
	start := p.i
	if err := p.value(0); err != nil {
		return 0, err
	}
	p.ws()
	if p.i != len(b) {
		return 0, bodyErr(BodyTrailingData, "%q after the JSON value, at byte %d", clip(b[p.i:]), p.i)
	}
	if b[start] != '{' {
		return 0, bodyErr(BodyNotAnObject, "the body is %s, not an object", kindOf(b[start]))
	}
	var delta *member
	if len(p.members) > 1 {
		seen := make(map[string]bool, len(p.members))
		for _, m := range p.members {
			if seen[m.name] {
				return 0, bodyErr(BodyDuplicateField, "member %q appears twice (byte %d)", m.name, m.at)
			}
			seen[m.name] = true
		}
	}
	for i := range p.members {
		m := &p.members[i]
		switch {
		case m.name != "delta":
			return 0, bodyErr(BodyUnknownField, "member %q (byte %d): the object has only \"delta\"", m.name, m.at)
		case m.escaped:
			return 0, bodyErr(BodyEscapedName, "the name \"delta\" is written with an escape (byte %d)", m.at)
		}
		delta = m
	}
	if delta == nil {
		return 0, bodyErr(BodyMissingDelta, "the object has no member \"delta\"")
	}
	tok := b[delta.value:delta.end]
	if !isIntegerToken(tok) {
		return 0, bodyErr(BodyNotAnInteger, "delta is %s, not an integer token (byte %d)", clip(tok), delta.value)
	}
	n, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil || n < 1 || n > DefaultMaxDelta {
		return 0, bodyErr(BodyDeltaOutOfRange, "delta %s outside 1..%d", clip(tok), DefaultMaxDelta)
	}
	return n, nil
}

// member is one top-level member of an object body: its decoded name,
// whether the name had escapes, and the byte span of its value.
type member struct {
	name       string
	escaped    bool
	at         int // the name's first byte
	value, end int
}

// maxDepth bounds the nesting of arrays and objects the scanner follows.
const maxDepth = 64

// scanner checks JSON syntax (RFC 8259) and records the members of the
// top-level object.
type scanner struct {
	b       []byte
	i       int
	members []member
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) syntax(what string) error {
	if p.i >= len(p.b) {
		return bodyErr(BodyNotJSON, "%s: the body ends at byte %d", what, p.i)
	}
	return bodyErr(BodyNotJSON, "%s at byte %d", what, p.i)
}

// value scans one JSON value at p.i (no leading whitespace).
func (p *scanner) value(depth int) error {
	if p.i >= len(p.b) {
		if p.i == 0 {
			return bodyErr(BodyNotJSON, "the body is empty")
		}
		return p.syntax("want a value")
	}
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return p.syntax(fmt.Sprintf("nesting deeper than %d", maxDepth))
		}
		if c == '{' {
			return p.object(depth)
		}
		return p.array(depth)
	case c == '"':
		_, _, err := p.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			return nil
		}
	}
	return p.syntax("want a value")
}

func (p *scanner) object(depth int) error {
	p.i++ // '{'
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.syntax("want a member name")
		}
		at := p.i
		name, escaped, err := p.str()
		if err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.syntax("want ':'")
		}
		p.i++
		p.ws()
		v := p.i
		if err := p.value(depth + 1); err != nil {
			return err
		}
		if depth == 0 {
			p.members = append(p.members, member{name: name, escaped: escaped, at: at, value: v, end: p.i})
		}
		p.ws()
		if p.i >= len(p.b) {
			return p.syntax("want ',' or '}'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return nil
		default:
			return p.syntax("want ',' or '}'")
		}
	}
}

func (p *scanner) array(depth int) error {
	p.i++ // '['
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) {
			return p.syntax("want ',' or ']'")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case ']':
			p.i++
			return nil
		default:
			return p.syntax("want ',' or ']'")
		}
	}
}

// str scans a string and returns it decoded, and whether it had escapes.
func (p *scanner) str() (string, bool, error) {
	p.i++ // '"'
	var out []byte
	escaped := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), escaped, nil
		case c < 0x20:
			return "", false, p.syntax("control character in a string")
		case c == '\\':
			escaped = true
			if p.i+1 >= len(p.b) {
				p.i++
				return "", false, p.syntax("unfinished escape")
			}
			e := p.b[p.i+1]
			if r, ok := simpleEscapes[e]; ok {
				out = append(out, r)
				p.i += 2
				continue
			}
			if e != 'u' || len(p.b)-p.i < 6 {
				p.i++
				return "", false, p.syntax("invalid escape")
			}
			r, err := strconv.ParseUint(string(p.b[p.i+2:p.i+6]), 16, 16)
			if err != nil {
				p.i++
				return "", false, p.syntax("invalid \\u escape")
			}
			out = utf8.AppendRune(out, rune(r)) // a lone surrogate decodes to U+FFFD
			p.i += 6
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false, p.syntax("invalid UTF-8")
			}
			out = append(out, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", false, p.syntax("unterminated string")
}

var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// number scans a JSON number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (p *scanner) number() error {
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
		if p.i < len(p.b) && isDigit(p.b[p.i]) {
			return p.syntax("leading zero in a number")
		}
	case p.i < len(p.b) && isDigit(p.b[p.i]):
		p.digits()
	default:
		return p.syntax("want a digit")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return p.syntax("want a digit after '.'")
		}
		p.digits()
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return p.syntax("want a digit in the exponent")
		}
		p.digits()
	}
	return nil
}

func (p *scanner) digits() {
	for p.i < len(p.b) && isDigit(p.b[p.i]) {
		p.i++
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIntegerToken reports whether a well-formed JSON value is an integer
// token: a number without fraction or exponent.
func isIntegerToken(tok []byte) bool {
	if len(tok) == 0 || (tok[0] != '-' && !isDigit(tok[0])) {
		return false
	}
	for _, c := range tok[1:] {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// kindOf names the kind of a well-formed JSON value by its first byte.
func kindOf(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// clip quotes at most 32 bytes of b for an error's words.
func clip(b []byte) string {
	if len(b) > 32 {
		return strconv.Quote(string(b[:32])) + "..."
	}
	return strconv.Quote(string(b))
}
