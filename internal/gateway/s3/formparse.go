package s3

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"html"
	"reflect"
	"strings"
	"unsafe"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3api"
)

// fasthttp reads a multipart/form-data body of known length (a browser
// upload, POST Object) as it reads the request, before any handler:
// the file goes to memory or, past 16 MiB, to a temporary file on the
// gateway's disk, and the body versitygw then parses is one fasthttp
// writes again from what it kept, without the parts it dropped (a part
// with an empty field name). versitygw parses the form itself, streaming
// the file, but does not turn that reading off in the fiber app it makes
// and keeps the app unexported.

// streamForms turns fasthttp's reading of multipart forms off in api's
// fiber app, so that versitygw reads POST bodies from the connection as
// they come. It must run before api serves. It reports whether it found
// the app (a versitygw whose server has no such field keeps fasthttp's
// default).
func streamForms(api *s3api.S3ApiServer) bool {
	v := reflect.ValueOf(api).Elem().FieldByName("app")
	if !v.IsValid() || v.Type() != reflect.TypeOf((*fiber.App)(nil)) {
		return false
	}
	app := *(**fiber.App)(unsafe.Pointer(v.UnsafeAddr()))
	if app == nil || app.Server() == nil {
		return false
	}
	app.Server().DisablePreParseMultipartForm = true
	return true
}

// policyFailed is what precedes the failed condition in versitygw's
// message for a POST whose form breaks its policy.
const policyFailed = "Policy Condition failed: "

// fixPolicyWording is a fiber middleware, run before versitygw's: for a
// POST refused because a policy condition failed, it rewrites the
// condition in the error's message as S3 writes it, its elements
// separated by ", " and its quotes plain (`["eq", "$key", "a"]`, where
// versitygw gives the policy's own JSON, XML-escaped: `[&#34;eq&#34;,...`).
// Clients match on S3's form.
func fixPolicyWording(ctx fiber.Ctx) error {
	err := ctx.Next()
	if ctx.Method() != fiber.MethodPost || ctx.Response().StatusCode() != fiber.StatusForbidden {
		return err
	}
	if body, ok := rewordPolicyFailure(ctx.Response().Body()); ok {
		ctx.Response().SetBody(body)
	}
	return err
}

// rewordPolicyFailure rewrites the condition after policyFailed in an
// XML error body, as fixPolicyWording; it reports whether it did.
func rewordPolicyFailure(body []byte) ([]byte, bool) {
	i := bytes.Index(body, []byte(policyFailed))
	if i < 0 {
		return nil, false
	}
	start := i + len(policyFailed)
	end := bytes.Index(body[start:], []byte("</Message>"))
	if end < 0 {
		return nil, false
	}
	var cond []json.RawMessage
	if json.Unmarshal([]byte(html.UnescapeString(string(body[start:start+end]))), &cond) != nil || len(cond) == 0 {
		return nil, false
	}
	var b strings.Builder
	b.WriteByte('[')
	for k, e := range cond {
		if k > 0 {
			b.WriteString(", ")
		}
		var compact bytes.Buffer
		if json.Compact(&compact, e) != nil {
			return nil, false
		}
		xml.EscapeText(&xmlText{&b}, compact.Bytes())
	}
	b.WriteByte(']')
	out := append([]byte{}, body[:start]...)
	out = append(out, b.String()...)
	return append(out, body[start+end:]...), true
}

// xmlText writes XML-escaped text with its quotes left plain, as they
// may be in an element's text.
type xmlText struct{ b *strings.Builder }

func (w *xmlText) Write(p []byte) (int, error) {
	s := strings.NewReplacer("&#34;", `"`, "&#39;", "'").Replace(string(p))
	w.b.WriteString(s)
	return len(p), nil
}
