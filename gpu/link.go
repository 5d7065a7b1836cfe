package gpu

import (
	"fmt"
	"strconv"
)

// Link is the class of the path between two GPUs, as `nvidia-smi topo -m` names it. Links are
// ordered by bandwidth, so comparing two Links with < and > compares how fast the paths are:
//
//	LinkSelf < LinkSYS < LinkNODE < LinkPHB < LinkPXB < LinkPIX < NVLink(1) < NVLink(2) < ...
//
// The zero value, LinkSelf, is not a path: it is the diagonal of the matrix ("X") and the
// WeakestLink of a set with fewer than two GPUs.
type Link uint16

const (
	// LinkSelf is a GPU's relation to itself ("X").
	LinkSelf Link = iota
	// LinkSYS crosses the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric). Older
	// drivers print it as SOC.
	LinkSYS
	// LinkNODE crosses the interconnect between PCIe host bridges inside one NUMA node.
	LinkNODE
	// LinkPHB goes through a PCIe host bridge (typically the CPU).
	LinkPHB
	// LinkPXB crosses several PCIe bridges without going through a host bridge.
	LinkPXB
	// LinkPIX crosses at most one PCIe bridge.
	LinkPIX

	// linkNV0 is the base of the NVLink range: NV# is linkNV0+#. Keeping the bond width in the
	// value is what makes NV12 > NV2 a plain integer comparison.
	linkNV0
)

// MaxNVLinks bounds the bond width NVLink accepts. Current parts have 18 links per GPU; the
// headroom is for future parts, the bound is so that garbage such as NV99999 is rejected.
const MaxNVLinks = 1024

// NVLink returns the link for a bonded set of n NVLinks (nvidia-smi's NV<n>). It panics if n is
// outside 1..MaxNVLinks, as that is a programming error; ParseLink is the checked path.
func NVLink(n int) Link {
	if n < 1 || n > MaxNVLinks {
		panic(fmt.Sprintf("gpu: NVLink(%d): bond width must be 1..%d", n, MaxNVLinks))
	}
	return linkNV0 + Link(n)
}

// IsNVLink reports whether the path is a direct NVLink bond (possibly through NVSwitch).
func (l Link) IsNVLink() bool { return l > linkNV0 }

// NVLinks is the bond width of an NVLink path, 0 for anything else.
func (l Link) NVLinks() int {
	if !l.IsNVLink() {
		return 0
	}
	return int(l - linkNV0)
}

var pcieTokens = [...]string{LinkSelf: "X", LinkSYS: "SYS", LinkNODE: "NODE", LinkPHB: "PHB", LinkPXB: "PXB", LinkPIX: "PIX"}

// String is the nvidia-smi token: "X", "SYS", "NODE", "PHB", "PXB", "PIX" or "NV<n>".
func (l Link) String() string {
	switch {
	case l.IsNVLink():
		return "NV" + strconv.Itoa(l.NVLinks())
	case int(l) < len(pcieTokens):
		return pcieTokens[l]
	}
	// Only linkNV0 itself lands here; it is never produced by this package.
	return fmt.Sprintf("Link(%d)", uint16(l))
}

// ParseLink reads one cell of `nvidia-smi topo -m`. It accepts exactly the tokens String prints,
// plus "SOC", which drivers before the NODE class existed printed for cross-socket paths.
func ParseLink(s string) (Link, error) {
	switch s {
	case "X":
		return LinkSelf, nil
	case "SYS", "SOC":
		return LinkSYS, nil
	case "NODE":
		return LinkNODE, nil
	case "PHB":
		return LinkPHB, nil
	case "PXB":
		return LinkPXB, nil
	case "PIX":
		return LinkPIX, nil
	}
	if len(s) > 2 && s[:2] == "NV" {
		digits := s[2:]
		// strconv.Atoi would also take "+3" and "03"; only canonical decimal is a real token.
		if digits[0] != '0' && allDigits(digits) {
			if n, err := strconv.Atoi(digits); err == nil && n <= MaxNVLinks {
				return NVLink(n), nil
			}
		}
		return 0, fmt.Errorf("invalid NVLink token %q (want NV1..NV%d)", s, MaxNVLinks)
	}
	return 0, fmt.Errorf("unknown link %q (want X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)", s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Bandwidth is a relative weight for the path, used to add paths up when comparing GPU sets.
// NVLink counts 25 per bonded link, about the one-direction GB/s of one NVLink from V100 to
// H100; the PCIe classes step down from just under one NVLink (a single switch on PCIe Gen4 x16)
// to the cross-socket path. Only the order and the rough ratios matter: a wider NVLink bond is
// worth proportionally more, and any NVLink beats any PCIe path.
func (l Link) Bandwidth() int {
	switch {
	case l.IsNVLink():
		return 25 * l.NVLinks()
	case l == LinkPIX:
		return 24
	case l == LinkPXB:
		return 20
	case l == LinkPHB:
		return 16
	case l == LinkNODE:
		return 12
	case l == LinkSYS:
		return 8
	}
	return 0
}

// MarshalText makes Links render as their nvidia-smi token in JSON and logs.
func (l Link) MarshalText() ([]byte, error) {
	if !l.IsNVLink() && int(l) >= len(pcieTokens) {
		return nil, fmt.Errorf("gpu: invalid link value %d", uint16(l))
	}
	return []byte(l.String()), nil
}

// UnmarshalText is ParseLink for encoding/json and friends.
func (l *Link) UnmarshalText(b []byte) error {
	v, err := ParseLink(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}
