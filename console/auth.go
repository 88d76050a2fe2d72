package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// Cookie names.
const (
	csrfCookie    = "fairrelay_csrf"
	sessionCookie = "fairrelay_session"
	// maxForm is the largest form body a write reads.
	maxForm = 64 << 10
)

// crossOrigin refuses a request a browser marks as sent from another site
// (Sec-Fetch-Site, or an Origin whose host is not the request's).
var crossOrigin = http.NewCrossOriginProtection()

// sessionValue is the session cookie for token: an HMAC of a fixed label
// under the token, so it changes with the token and reveals nothing of it.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("fairrelay console session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// equal compares two secrets in constant time (their hashes, so that the
// time does not tell the length either).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	t, ok := strings.CutPrefix(h, "Bearer ")
	return t, ok
}

// signedIn reports whether r carries the token (header) or the session
// cookie of a sign-in.
func (c *console) signedIn(r *http.Request) bool {
	if c.o.Token == "" {
		return false
	}
	if t, ok := bearer(r); ok {
		return equal(t, c.o.Token)
	}
	ck, err := r.Cookie(sessionCookie)
	return err == nil && equal(ck.Value, c.session)
}

// read wraps a page: with ProtectReads, a request that is not signed in is
// sent to the sign-in form (a wrong Authorization header is 403).
func (c *console) read(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.o.ProtectReads && !c.signedIn(r) {
			if _, ok := bearer(r); ok {
				c.fail(w, r, http.StatusForbidden, "Wrong token", "The Authorization header does not carry this console's token.")
				return
			}
			http.Redirect(w, r, pageLink("/login", "next", r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r)
	}
}

// errForbidden is the 403 of a write that fails its checks; its text is
// shown to the operator.
type errForbidden struct{ title, msg string }

// checkWrite runs the checks every write passes before it reads its input:
// a browser's cross-site request is refused, the form must carry the CSRF
// value of the cookie (double submit), and, when needToken, the token.
func (c *console) checkWrite(r *http.Request, needToken bool) *errForbidden {
	if err := crossOrigin.Check(r); err != nil {
		return &errForbidden{"Cross-site request refused", "The browser says this form was sent from another site. Open the console and send it from there."}
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" || !equal(r.PostFormValue("csrf"), ck.Value) {
		return &errForbidden{"Form expired", "The form's check value (CSRF) does not match this browser's. Reload the page and send the form again."}
	}
	if !needToken {
		return nil
	}
	if c.o.Token == "" {
		return &errForbidden{"This console is read-only", "It was started without a token, so it refuses every write. Start it with --token or FAIRRELAY_TOKEN to redrive from here."}
	}
	t := r.PostFormValue("token")
	if bt, ok := bearer(r); ok && t == "" {
		t = bt
	}
	if t == "" {
		return &errForbidden{"Token required", "Every write needs the operator token. Type it in the form's token field."}
	}
	if !equal(t, c.o.Token) {
		return &errForbidden{"Wrong token", "The token does not match this console's. Nothing was changed."}
	}
	return nil
}

// write wraps a POST: the body is capped, the form parsed, the checks run;
// any failure is 403 (400 for a form that cannot be read) and nothing is
// written.
func (c *console) write(h func(http.ResponseWriter, *http.Request), needToken bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				c.fail(w, r, http.StatusRequestEntityTooLarge, "Form too large", "The form is larger than the console accepts.")
				return
			}
			c.fail(w, r, http.StatusBadRequest, "Unreadable form", "The form could not be read.")
			return
		}
		if f := c.checkWrite(r, needToken); f != nil {
			c.log.Warn("console: write refused", "path", r.URL.Path, "why", f.title, "remote", r.RemoteAddr)
			c.fail(w, r, http.StatusForbidden, f.title, f.msg)
			return
		}
		h(w, r)
	}
}

// csrfFor returns the browser's CSRF value, setting a new cookie when it has
// none.
func (c *console) csrfFor(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
		return ck.Value
	}
	v := randomHex(32)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: c.o.Secure, SameSite: http.SameSiteStrictMode})
	return v
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.o.Token == "" {
		c.fail(w, r, http.StatusNotFound, "No sign-in", "This console was started without a token: there is nothing to sign in to.")
		return
	}
	c.render(w, r, http.StatusOK, "login", &loginData{Next: safeNext(r.FormValue("next"))})
}

type loginData struct {
	Next, Error string
}

// login checks the token and sets the session cookie.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	if c.o.Token == "" {
		c.fail(w, r, http.StatusNotFound, "No sign-in", "This console was started without a token: there is nothing to sign in to.")
		return
	}
	if !equal(r.PostFormValue("token"), c.o.Token) {
		c.log.Warn("console: sign-in refused", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusForbidden, "login", &loginData{Next: next, Error: "Wrong token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.session, Path: "/", HttpOnly: true, Secure: c.o.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// maxNext is the longest sign-in return address the console keeps.
const maxNext = 2000

// safeNext keeps a sign-in's return address inside the console: an
// absolute path on this origin, in the form a request line carries it
// (RequestURI: printable ASCII, everything else percent-encoded), that no
// browser can read as another host. A browser removes tabs and line breaks
// from a URL and reads '\' as '/' (the WHATWG URL standard), so "/<TAB>/evil"
// and "/\evil" are "//evil", another host; such an address, or anything
// else that is not one, becomes "/", the start page.
func safeNext(s string) string {
	if s == "" || len(s) > maxNext || s[0] != '/' || len(s) > 1 && s[1] == '/' {
		return "/"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return "/"
		}
	}
	return s
}
