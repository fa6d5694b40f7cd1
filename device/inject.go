package device

import (
	"strings"

	"vgpu/abi"
	"vgpu/inject"
)

// Fault injection: the device's one rule set (package inject), made from Config.Inject and
// changed at run time through AddInjection / RemoveInjection / ClearInjections (the control
// socket's "inject" command). Every part with a hook gets the same Set; rules survive a device
// reset (they are the user's configuration), what they did to the device does not (a stalled
// queue, a hung MES frame end with the reset).

// initInjection builds the Set and hands it to each part. Called once by New, after the
// parts exist and before any of them runs.
func (d *Device) initInjection() {
	d.inj = inject.NewSet(d.rl)
	if len(d.cfg.Inject) > 0 {
		_, _ = d.inj.Add(d.cfg.Inject...) // validate bounded their number
		d.log.Info("fault injection", "rules", inject.Format(d.cfg.Inject))
	}
	d.mem.SetInjector(d.inj)
	d.irqs.SetInjector(d.inj)
	g := &d.gpu
	g.ih.SetInjector(d.inj)
	g.vm.SetInjector(d.inj)
	g.cp.SetInjector(d.inj)
	g.mes.SetInjector(d.inj)
}

// ParseInjections reads rules in the grammar of docs/inject.md; besides numbers, IV clients
// and sources and MES opcodes may be named as abi names them, with or without the prefix
// (src=CP_EOP, src=IH_SRC_CP_EOP, op=ADD_QUEUE, client=GRBM_CP).
func ParseInjections(text string) ([]inject.Rule, error) { return inject.Parse(text, abiNames) }

// abiNames is the inject.Resolver over abi's constant groups.
func abiNames(key, name string) (int, bool) {
	var prefix string
	switch key {
	case "client":
		prefix = "IH_CLIENT_"
	case "src", "new-src":
		prefix = "IH_SRC_"
	case "op":
		prefix = "MES_SCH_API_"
	default:
		return 0, false
	}
	name = strings.ToUpper(name)
	if !strings.HasPrefix(name, prefix) {
		name = prefix + name
	}
	for _, g := range abi.Groups {
		for _, c := range g.Consts {
			if g.Prefix+c.Name == name && c.Value <= 0xFF {
				return int(c.Value), true
			}
		}
	}
	return 0, false
}

// AddInjection parses text and adds its rules; it returns their ids.
func (d *Device) AddInjection(text string) ([]int, error) {
	rules, err := ParseInjections(text)
	if err != nil {
		return nil, err
	}
	return d.inj.Add(rules...)
}

// RemoveInjection drops the rule with id.
func (d *Device) RemoveInjection(id int) error { return d.inj.Remove(id) }

// ClearInjections drops every rule.
func (d *Device) ClearInjections() { d.inj.Clear() }

// Injections lists the rules with their counters.
func (d *Device) Injections() []inject.Status { return d.inj.List() }

// InjectionTotals is the injections made per kind (inject.Kind order) since the device was
// made.
func (d *Device) InjectionTotals() [inject.NumKinds]uint64 { return d.inj.Totals() }

// injectionStatus is the status's view of the injections: the rules, and the totals of the
// kinds that fired.
func (d *Device) injectionStatus() InjectionStatus {
	st := InjectionStatus{Rules: d.Injections(), Totals: map[string]uint64{}}
	for k, n := range d.InjectionTotals() {
		if n != 0 {
			st.Totals[inject.Kind(k).String()] = n
		}
	}
	return st
}
