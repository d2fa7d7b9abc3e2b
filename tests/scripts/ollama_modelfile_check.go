// Ollama's side of the Modelfile test (tests/scripts/ollama_modelfile_test.py): reads Modelfiles as
// Ollama reads them and renders their TEMPLATE with Go's text/template on the data Ollama gives it.
// Standard library only (Debian's golang-go; no module, no network).
//
// Written for this test from Ollama's behaviour (github.com/ollama/ollama, MIT licence), not copied:
//   - the Modelfile grammar of parser/parser.go's ParseFile: a per-rune state machine (command
//     name, PARAMETER name, MESSAGE role, value, comment); a value runs to the end of its line, or
//     on over spaces and newlines until it is a whole quoted string, "..." or """...""" (no escapes:
//     the quotes are cut off as they are), the line's surrounding spaces trimmed first; runes that
//     are not printable (unicode.IsPrint) are dropped, except spaces, tabs and newlines inside a
//     value; command names are case-insensitive, PARAMETER names keep their case; a file needs a FROM;
//   - the template data of template/template.go's Execute for a template that uses .Messages: the
//     request's messages collated (system messages joined with "\n\n" as .System and kept in
//     .Messages; consecutive messages of one role merged with "\n\n"), .Tools nil, .Response "",
//     .Think false; parsed with Option("missingkey=zero") and Ollama's `json` function;
//   - server/routes.go's ChatHandler: the Modelfile's SYSTEM goes first when the request's first
//     message is not a system message.
//
// Usage: ollama_modelfile_check CASES.json
//
//	CASES.json: [{"modelfile": PATH, "conversations": [[{"role": R, "content": C}, ...], ...]}, ...]
//
// Prints JSON: [{"modelfile": PATH, "error": "", "commands": [{"name", "args"}], "template": T,
//
//	"system": S, "stops": [...], "renderings": [...]}]; a case that fails has only "error".
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode"
	"unicode/utf8"
)

type command struct {
	Name string `json:"name"`
	Args string `json:"args"`
}

// What the parser is reading.
type readState int

const (
	betweenCommands readState = iota
	commandName
	commandValue
	parameterName
	messageRole
	comment
)

func isLetter(r rune) bool  { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
func isDigit(r rune) bool   { return r >= '0' && r <= '9' }
func isBlank(r rune) bool   { return r == ' ' || r == '\t' }
func isNewline(r rune) bool { return r == '\r' || r == '\n' }

var commandNames = map[string]bool{"from": true, "license": true, "template": true, "system": true,
	"adapter": true, "draft": true, "renderer": true, "parser": true, "parameter": true, "message": true,
	"requires": true}

// stripQuotes: the value inside "..." or """...""", the text itself when unquoted, or false for an
// opening quote not (yet) closed.
func stripQuotes(s string) (string, bool) {
	if strings.HasPrefix(s, `"""`) {
		if len(s) >= 6 && strings.HasSuffix(s, `"""`) {
			return s[3 : len(s)-3], true
		}
		return "", false
	}
	if strings.HasPrefix(s, `"`) {
		if len(s) >= 2 && strings.HasSuffix(s, `"`) {
			return s[1 : len(s)-1], true
		}
		return "", false
	}
	return s, true
}

// step: the state after rune r in state s, whether r is kept in the buffer, or an error.
func step(s readState, r rune) (readState, bool, error) {
	switch s {
	case betweenCommands:
		if r == '#' {
			return comment, false, nil
		}
		if isBlank(r) || isNewline(r) {
			return betweenCommands, false, nil
		}
		return commandName, true, nil
	case commandName:
		if isLetter(r) {
			return commandName, true, nil
		}
		if isBlank(r) {
			return commandValue, false, nil
		}
		return s, false, fmt.Errorf("command must be one of %v", "from, license, template, system, adapter, draft, renderer, parser, parameter, message, requires")
	case commandValue:
		if isNewline(r) || isBlank(r) {
			return betweenCommands, true, nil
		}
		return commandValue, true, nil
	case parameterName, messageRole:
		if isLetter(r) || (s == parameterName && (isDigit(r) || r == '_')) {
			return s, true, nil
		}
		if isBlank(r) {
			return commandValue, false, nil
		}
		return s, false, fmt.Errorf("unexpected EOF")
	case comment:
		if isNewline(r) {
			return betweenCommands, false, nil
		}
		return comment, false, nil
	}
	return s, false, fmt.Errorf("bad parser state")
}

func parseModelfile(text string) ([]command, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	var commands []command
	var current command
	var buffer strings.Builder
	var role string
	state := betweenCommands
	line := 1
	for len(text) > 0 {
		r, size := utf8.DecodeRuneInString(text)
		text = text[size:]
		if isNewline(r) {
			line++
		}
		next, keep, err := step(state, r)
		if err != nil {
			return nil, fmt.Errorf("(line %d): %v", line, err)
		}
		if next != state {
			switch state {
			case commandName:
				name := strings.ToLower(buffer.String())
				if !commandNames[name] {
					return nil, fmt.Errorf("(line %d): unknown command %q", line, buffer.String())
				}
				switch name {
				case "from":
					current.Name = "model"
				case "parameter":
					next = parameterName
				case "message":
					next = messageRole
					current.Name = name
				default:
					current.Name = name
				}
			case parameterName:
				current.Name = buffer.String()
			case messageRole:
				role = buffer.String()
				if role != "system" && role != "user" && role != "assistant" {
					return nil, fmt.Errorf("(line %d): message role must be system, user or assistant", line)
				}
			case commandValue:
				value, whole := stripQuotes(strings.TrimSpace(buffer.String()))
				if !whole || isBlank(r) { // the value goes on: keep the space or newline
					buffer.WriteRune(r)
					continue
				}
				if role != "" {
					value = role + ": " + value
					role = ""
				}
				current.Args = value
				commands = append(commands, current)
			}
			buffer.Reset()
			state = next
		}
		if keep && unicode.IsPrint(r) {
			buffer.WriteRune(r)
		}
	}
	switch state {
	case betweenCommands, comment:
	case commandValue:
		value, whole := stripQuotes(strings.TrimSpace(buffer.String()))
		if !whole {
			return nil, fmt.Errorf("unexpected EOF: %s", buffer.String())
		}
		if role != "" {
			value = role + ": " + value
		}
		current.Args = value
		commands = append(commands, current)
	default:
		return nil, fmt.Errorf("unexpected EOF")
	}
	for _, c := range commands {
		if c.Name == "model" {
			return commands, nil
		}
	}
	return nil, fmt.Errorf("no FROM line")
}

// message: the fields of Ollama's api.Message a template may read.
type message struct {
	Role      string   `json:"role"`
	Content   string   `json:"content"`
	Thinking  string   `json:"-"`
	ToolName  string   `json:"-"`
	Images    []string `json:"-"`
	ToolCalls []any    `json:"-"`
}

// identifiers: the field and variable names a template mentions (lower-cased), as Ollama's Vars.
func identifiers(n parse.Node, into map[string]bool) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				identifiers(c, into)
			}
		}
	case *parse.ActionNode:
		identifiers(n.Pipe, into)
	case *parse.TemplateNode:
		identifiers(n.Pipe, into)
	case *parse.IfNode:
		identifiers(&n.BranchNode, into)
	case *parse.RangeNode:
		identifiers(&n.BranchNode, into)
	case *parse.WithNode:
		identifiers(&n.BranchNode, into)
	case *parse.BranchNode:
		identifiers(n.Pipe, into)
		identifiers(n.List, into)
		if n.ElseList != nil {
			identifiers(n.ElseList, into)
		}
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				for _, a := range c.Args {
					identifiers(a, into)
				}
			}
		}
	case *parse.FieldNode:
		for _, id := range n.Ident {
			into[strings.ToLower(id)] = true
		}
	case *parse.VariableNode:
		for _, id := range n.Ident {
			into[strings.ToLower(id)] = true
		}
	}
}

// render: the prompt Ollama's /api/chat writes for `conversation` with this TEMPLATE and SYSTEM.
func render(tmpl *template.Template, system string, conversation []message) (string, error) {
	msgs := append([]message(nil), conversation...)
	if system != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		msgs = append([]message{{Role: "system", Content: system}}, msgs...)
	}
	var systems []string
	var collated []*message
	for i := range msgs {
		if msgs[i].Role == "system" {
			systems = append(systems, msgs[i].Content)
		}
		if n := len(collated); n > 0 && collated[n-1].Role == msgs[i].Role && msgs[i].Role != "tool" {
			collated[n-1].Content += "\n\n" + msgs[i].Content
		} else {
			collated = append(collated, &msgs[i])
		}
	}
	var out strings.Builder
	err := tmpl.Execute(&out, map[string]any{
		"System": strings.Join(systems, "\n\n"), "Messages": collated, "Tools": []any(nil), "Response": "",
		"Think": false, "IsThinkSet": false, "Query": "", "Document": "", "Instruction": "",
	})
	return out.String(), err
}

type testCase struct {
	Modelfile     string      `json:"modelfile"`
	Conversations [][]message `json:"conversations"`
}

type result struct {
	Modelfile  string    `json:"modelfile"`
	Error      string    `json:"error,omitempty"`
	Commands   []command `json:"commands,omitempty"`
	Template   string    `json:"template"`
	System     string    `json:"system"`
	Stops      []string  `json:"stops"`
	Renderings []string  `json:"renderings"`
}

func check(c testCase) result {
	r := result{Modelfile: c.Modelfile, Stops: []string{}, Renderings: []string{}}
	fail := func(format string, args ...any) result {
		return result{Modelfile: c.Modelfile, Error: fmt.Sprintf(format, args...)}
	}
	text, err := os.ReadFile(c.Modelfile)
	if err != nil {
		return fail("%v", err)
	}
	r.Commands, err = parseModelfile(string(text))
	if err != nil {
		return fail("Ollama's parser would refuse it: %v", err)
	}
	for _, cmd := range r.Commands {
		switch cmd.Name {
		case "template":
			r.Template = cmd.Args
		case "system":
			r.System = cmd.Args
		case "stop":
			r.Stops = append(r.Stops, cmd.Args)
		}
	}
	if r.Template == "" || len(c.Conversations) == 0 {
		return r
	}
	funcs := template.FuncMap{"json": func(v any) string { b, _ := json.Marshal(v); return string(b) }}
	tmpl, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(r.Template)
	if err != nil {
		return fail("the TEMPLATE is not a Go template: %v", err)
	}
	names := map[string]bool{}
	identifiers(tmpl.Tree.Root, names)
	if !names["messages"] {
		return fail("the TEMPLATE does not use .Messages (Ollama would render it the legacy way, which this check does not model)")
	}
	for i, conversation := range c.Conversations {
		text, err := render(tmpl, r.System, conversation)
		if err != nil {
			return fail("conversation %d: executing the TEMPLATE: %v", i, err)
		}
		r.Renderings = append(r.Renderings, text)
	}
	return r
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ollama_modelfile_check CASES.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var cases []testCase
	if err := json.Unmarshal(data, &cases); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	results := make([]result, 0, len(cases))
	for _, c := range cases {
		results = append(results, check(c))
	}
	out, _ := json.MarshalIndent(results, "", " ")
	fmt.Println(string(out))
}
