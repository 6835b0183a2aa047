package hclplan

import (
	"encoding/json"
	"strings"
	"testing"
)

func inputPlan(input string) string {
	return "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"ask\"\n" + input + "  }\n" +
		"  prompt \"ask\" {\n" + input + "  }\n}\n"
}

const fullInput = `    input {
      max_rounds = 2
      elicitation {
        max_message_length = 40
        field "password" {
          type       = "string"
          max_length = 16
        }
        field "count" {
          type     = "integer"
          min      = 1
          max      = 10
          optional = true
        }
        field "color" {
          type     = "string"
          enum     = ["red", "blue"]
          optional = true
        }
        field "sure" {
          type     = "boolean"
          optional = true
        }
      }
      elicitation_url { origins = ["https://auth.example.com"] }
      sampling { max_tokens = 100 }
      roots = true
    }
`

func TestParseInput(t *testing.T) {
	p, diags := Parse("p.hcl", []byte(inputPlan(fullInput)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, in := range []*InputRules{p.Steps[0].Input, p.Prompts[0].Input} {
		if in == nil || in.MaxRounds != 2 || in.Elicitation == nil || len(in.Elicitation.Fields) != 4 ||
			in.Elicitation.MaxMessageLength != 40 || in.URL == nil || in.URL.Origins[0] != "https://auth.example.com" ||
			in.Sampling == nil || in.Sampling.MaxTokens != 100 || in.Sampling.MaxMessages != DefaultMaxMessages || !in.Roots {
			t.Fatalf("input rules %+v", in)
		}
	}
	sum := Summary(p)
	for _, want := range []string{
		"   - Input requests: at most 2 rounds per call.",
		"Elicitation (form), message up to 40 characters, fields: `password` string, at most 16 characters; `count` integer (min 1, max 10), optional;",
		"Elicitation (URL) of https URLs on `https://auth.example.com` only",
		"Sampling (an LLM completion the upstream asks the client for), at most 100 tokens and 10 messages",
		"Roots: the upstream may ask for the client's roots",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	js, err := JSON(p)
	if err != nil || !strings.Contains(string(js), `"input": {`) || !strings.Contains(string(js), `"max_tokens": 100`) {
		t.Fatalf("JSON lacks the input rules: %v\n%s", err, js)
	}
	// The digest is of the file's bytes, so signing covers the rules.
	other, _ := Parse("p.hcl", []byte(strings.Replace(inputPlan(fullInput), "max_tokens = 100", "max_tokens = 101", 1)))
	if other == nil || other.Digest == p.Digest {
		t.Fatal("the plan digest does not cover the input rules")
	}
	none, diags := Parse("p.hcl", []byte(inputPlan("")))
	if diags.HasErrors() || none.Steps[0].Input != nil || strings.Contains(Summary(none), "Input requests") {
		t.Fatalf("a step without an input block has rules: %v", diags)
	}
}

func TestParseInputDiagnostics(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"empty", "    input {}\n", "Empty input block"},
		{"two", "    input { roots = true }\n    input { roots = true }\n", "Duplicate input block"},
		{"rounds", "    input {\n      roots = true\n      max_rounds = 0\n    }\n", "Invalid max_rounds"},
		{"no fields", "    input {\n      elicitation {}\n    }\n", "Elicitation without fields"},
		{"unbounded string", "    input {\n      elicitation {\n        field \"x\" { type = \"string\" }\n      }\n    }\n", "Unbounded string field"},
		{"bad type", "    input {\n      elicitation {\n        field \"x\" { type = \"file\" }\n      }\n    }\n", "Invalid type"},
		{"length on number", "    input {\n      elicitation {\n        field \"x\" {\n          type = \"number\"\n          max_length = 3\n        }\n      }\n    }\n", "Invalid max_length"},
		{"min above max", "    input {\n      elicitation {\n        field \"x\" {\n          type = \"number\"\n          min = 3\n          max = 1\n        }\n      }\n    }\n", "Invalid bounds"},
		{"http origin", "    input {\n      elicitation_url { origins = [\"http://auth.example.com\"] }\n    }\n", "Invalid origin"},
		{"origin with path", "    input {\n      elicitation_url { origins = [\"https://auth.example.com/login\"] }\n    }\n", "Invalid origin"},
		{"no max_tokens", "    input {\n      sampling {}\n    }\n", "max_tokens"},
		{"unknown", "    input {\n      tasks = true\n    }\n", "Unsupported argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := Parse("p.hcl", []byte(inputPlan(tc.input)))
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diagnostics %v, want %q", diags, tc.want)
			}
		})
	}
}

func TestInputChecks(t *testing.T) {
	p, diags := Parse("p.hcl", []byte(inputPlan(fullInput)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := p.Steps[0].Input
	form := `{"mode":"form","message":"enter it","requestedSchema":{"type":"object","properties":{"password":{"type":"string"},"count":{"type":"integer"}}}}`
	for _, tc := range []struct {
		name, method, params, want string // want "" allows
	}{
		{"form", "elicitation/create", form, ""},
		{"form without mode", "elicitation/create", strings.Replace(form, `"mode":"form",`, "", 1), ""},
		{"field not allowed", "elicitation/create", strings.Replace(form, `"count"`, `"ssn"`, 1), `field "ssn" is not one the plan allows`},
		{"wrong type", "elicitation/create", strings.Replace(form, `"integer"`, `"string"`, 1), `field "count" is asked as type "string"`},
		{"required left out", "elicitation/create", `{"message":"m","requestedSchema":{"type":"object","properties":{"count":{"type":"integer"}}}}`, `leaves out field "password"`},
		{"long message", "elicitation/create", strings.Replace(form, "enter it", strings.Repeat("x", 41), 1), "41 characters, the plan allows 40"},
		{"url", "elicitation/create", `{"mode":"url","message":"log in","url":"https://auth.example.com/x?y=1","elicitationId":"e1"}`, ""},
		{"url other origin", "elicitation/create", `{"mode":"url","message":"log in","url":"https://evil.example.com/x","elicitationId":"e1"}`, "origin https://evil.example.com is not on the plan's list"},
		{"url not https", "elicitation/create", `{"mode":"url","message":"log in","url":"http://auth.example.com/x","elicitationId":"e1"}`, "is not an https URL"},
		{"sampling", "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":100}`, ""},
		{"sampling too long", "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":101}`, "maxTokens 101 is above the plan's max_tokens 100"},
		{"sampling with tools", "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10,"tools":[]}`, "offering tools"},
		{"roots", "roots/list", `{}`, ""},
		{"other method", "tools/call", `{}`, "is not an input request the plan can allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := in.CheckRequest(tc.method, json.RawMessage(tc.params))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckRequest: %v, want %q", err, tc.want)
			}
		})
	}
	var nilRules *InputRules
	if err := nilRules.CheckRequest("roots/list", nil); err == nil || !strings.Contains(err.Error(), "the plan allows no input requests here") {
		t.Fatalf("no rules: %v", err)
	}
	for _, tc := range []struct{ name, method, params, response, want string }{
		{"accept", "elicitation/create", form, `{"action":"accept","content":{"password":"hunter2","count":3}}`, ""},
		{"decline", "elicitation/create", form, `{"action":"decline"}`, ""},
		{"not asked", "elicitation/create", form, `{"action":"accept","content":{"password":"x","color":"red"}}`, `field "color" was not asked for`},
		{"too long", "elicitation/create", form, `{"action":"accept","content":{"password":"` + strings.Repeat("p", 17) + `"}}`, "17 characters, the plan allows 16"},
		{"out of bounds", "elicitation/create", form, `{"action":"accept","content":{"password":"x","count":11}}`, "outside the plan's bounds (min 1, max 10)"},
		{"not whole", "elicitation/create", form, `{"action":"accept","content":{"password":"x","count":1.5}}`, "not a whole number"},
		{"bad action", "elicitation/create", form, `{"action":"maybe"}`, `action "maybe"`},
		{"url accept", "elicitation/create", `{"mode":"url","message":"m","url":"https://auth.example.com"}`, `{"action":"accept"}`, ""},
		{"url content", "elicitation/create", `{"mode":"url","message":"m","url":"https://auth.example.com"}`, `{"action":"accept","content":{"a":1}}`, "carries content"},
		{"sampling", "sampling/createMessage", `{}`, `{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`, ""},
		{"roots", "roots/list", `{}`, `{"roots":[]}`, ""},
		{"roots bad", "roots/list", `{}`, `{"action":"accept"}`, "no roots list"},
	} {
		t.Run("response/"+tc.name, func(t *testing.T) {
			err := in.CheckResponse(tc.method, json.RawMessage(tc.params), json.RawMessage(tc.response))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckResponse: %v, want %q", err, tc.want)
			}
		})
	}
}
