package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"vgpu/control"
	"vgpu/device"
	"vgpu/inject"
)

// The control socket's "inject" command: fault-injection rules of the running device, added,
// listed, removed and cleared at run time (docs/inject.md).
//
//	{"cmd":"inject","args":{"op":"add","rules":"irq.drop:vector=0,n=3"}}  -> {"ids":[1], ...}
//	{"cmd":"inject","args":{"op":"list"}}                                 -> {"rules":[...],"totals":{...}}
//	{"cmd":"inject","args":{"op":"remove","id":1}}
//	{"cmd":"inject","args":{"op":"clear"}}
//
// Every op answers with the rules in force afterwards and the injections made per kind.

// injectArgs are the command's arguments.
type injectArgs struct {
	Op    string `json:"op"`
	Rules string `json:"rules,omitempty"`
	ID    int    `json:"id,omitempty"`
}

// injectResult is the command's result.
type injectResult struct {
	IDs    []int             `json:"ids,omitempty"`
	Rules  []inject.Status   `json:"rules"`
	Totals map[string]uint64 `json:"totals"`
}

func init() {
	controlHooks = append(controlHooks, func(s *control.Server, dev *device.Device) {
		s.Handle("inject", func(raw json.RawMessage) (any, error) { return injectCommand(dev, raw) })
	})
}

func injectCommand(dev *device.Device, raw json.RawMessage) (any, error) {
	var a injectArgs
	if err := control.DecodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var res injectResult
	switch a.Op {
	case "add":
		ids, err := dev.AddInjection(a.Rules)
		if err != nil {
			return nil, control.Errorf(control.CodeBadArgs, "%v", err)
		}
		res.IDs = ids
	case "list", "":
	case "remove":
		if err := dev.RemoveInjection(a.ID); err != nil {
			return nil, control.Errorf(control.CodeBadArgs, "%v", err)
		}
	case "clear":
		dev.ClearInjections()
	default:
		return nil, control.Errorf(control.CodeBadArgs, "op %q: want add, list, remove or clear", a.Op)
	}
	res.Rules = dev.Injections()
	if res.Rules == nil {
		res.Rules = []inject.Status{}
	}
	res.Totals = map[string]uint64{}
	for k, n := range dev.InjectionTotals() {
		res.Totals[inject.Kind(k).String()] = n
	}
	return res, nil
}

// injectCmd is `vgpu inject [--control PATH] RULES|list|clear|remove ID`.
func injectCmd(args []string) error {
	fl := flag.NewFlagSet("inject", flag.ContinueOnError)
	path := fl.String("control", os.Getenv(controlEnv), "the server's control socket (vgpu serve's ready line names it; default $"+controlEnv+")")
	asJSON := fl.Bool("json", false, "print the result as JSON")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: vgpu inject [--control PATH] [--json] RULES | list | clear | remove ID\n\n"+
			"RULES: fault-injection rules to add to the running device, e.g. 'irq.drop:vector=0,n=3; mes.hang:op=ADD_QUEUE' (docs/inject.md)\n\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return err
	}
	a, err := injectRequest(fl.Args())
	if err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--control is required (or set $" + controlEnv + ")")
	}
	var raw json.RawMessage
	if err := callControl(*path, "inject", a, &raw); err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Printf("%s\n", raw)
		return err
	}
	var res injectResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("inject: %w", err)
	}
	return printInject(os.Stdout, res)
}

// injectRequest turns the command line into the command's arguments; rules are checked here
// too, so a typo is reported before anything is sent.
func injectRequest(words []string) (injectArgs, error) {
	switch {
	case len(words) == 0:
		return injectArgs{}, errors.New("want RULES, list, clear or remove ID")
	case len(words) == 1 && (words[0] == "list" || words[0] == "clear"):
		return injectArgs{Op: words[0]}, nil
	case words[0] == "remove":
		if len(words) != 2 {
			return injectArgs{}, errors.New("remove takes one rule id (vgpu inject list shows them)")
		}
		id, err := strconv.Atoi(words[1])
		if err != nil || id <= 0 {
			return injectArgs{}, fmt.Errorf("remove %q: not a rule id", words[1])
		}
		return injectArgs{Op: "remove", ID: id}, nil
	}
	rules := strings.Join(words, " ")
	if _, err := device.ParseInjections(rules); err != nil {
		return injectArgs{}, err
	}
	return injectArgs{Op: "add", Rules: rules}, nil
}

func printInject(w io.Writer, res injectResult) error {
	if len(res.IDs) > 0 {
		fmt.Fprintf(w, "added rule %s\n", strings.Trim(strings.ReplaceAll(fmt.Sprint(res.IDs), " ", ", "), "[]"))
	}
	if len(res.Rules) == 0 {
		fmt.Fprintln(w, "no injection rules")
	} else {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tRULE\tSEEN\tFIRED\t")
		for _, r := range res.Rules {
			spent := ""
			if r.Spent {
				spent = "spent"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", r.ID, r.Rule, r.Seen, r.Fired, spent)
		}
		tw.Flush()
	}
	var parts []string
	for k := inject.Kind(0); k < inject.NumKinds; k++ {
		if n := res.Totals[k.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "injections so far: %s\n", strings.Join(parts, ", "))
	}
	return nil
}
