// Curio's side of a proving-engine request, written with Go's own formatting and encoding so
// that tests/gateway_curio.rs sends c2q exactly what Curio sends: the request ids of
// lib/ffi/cuzk_funcs.go (PoRepSnarkCuzk, ProveUpdateCuzk, WindowPoStCuzk, WinningPoStCuzk) and
// tasks/proofshare/task_prove.go (computePoRep, computeSnap), with the types Curio formats
// (go-state-types' abi.ActorID, abi.SectorNumber, abi.PoStRandomness; harmonytask.TaskID),
// and the C1 output wrapped as wrapC1Output wraps it.
//
// Standard library only: run with `go run tests/curio_requests.go -miner 1000 ...`. Prints one
// JSON object of request ids.
package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The types of go-state-types' abi package that Curio's format strings take, as declared
// there (ActorID has a String method; %d does not use it).
type ActorID uint64

func (e ActorID) String() string { return strconv.FormatInt(int64(e), 10) }

type SectorNumber uint64
type Randomness []byte
type PoStRandomness Randomness

// harmonytask.TaskID.
type TaskID int

// Curio's c1OutputWrapper (lib/ffi/cuzk_funcs.go): Go's encoding/json writes Phase1Out, a byte
// slice, as base64.
type c1OutputWrapper struct {
	SectorNum  int64  `json:"SectorNum"`
	Phase1Out  []byte `json:"Phase1Out"`
	SectorSize uint64 `json:"SectorSize"`
}

func randomness(text string) PoStRandomness {
	b, err := hex.DecodeString(text)
	if err != nil || len(b) != 32 {
		fail("randomness must be 32 bytes in hex: %q", text)
	}
	return PoStRandomness(b)
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func main() {
	miner := flag.Uint64("miner", 1000, "the miner's actor id")
	sectors := flag.String("sectors", "", "comma-separated sector numbers")
	task := flag.Int("task", 7, "the proof-share task id")
	partition := flag.Int("partition", 0, "the WindowPoSt partition index")
	window := flag.String("window-randomness", "", "the WindowPoSt randomness, hex")
	winning := flag.String("winning-randomness", "", "the WinningPoSt randomness, hex")
	wrap := flag.String("wrap", "", "c1-path:sector:sector-size:out-path, comma-separated: "+
		"write each C1 output wrapped as Curio sends it")
	flag.Parse()

	mid := ActorID(*miner)
	ids := map[string]any{}
	// Empty, not nil: encoding/json writes a nil slice as null.
	porep, snap, psPorep, psSnap := []string{}, []string{}, []string{}, []string{}
	for _, s := range strings.Split(*sectors, ",") {
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fail("sector %q: %v", s, err)
		}
		number := SectorNumber(n)
		taskID := TaskID(*task)
		// lib/ffi/cuzk_funcs.go, PoRepSnarkCuzk and ProveUpdateCuzk.
		porep = append(porep, fmt.Sprintf("porep-%d-%d", mid, number))
		snap = append(snap, fmt.Sprintf("snap-%d-%d", mid, number))
		// tasks/proofshare/task_prove.go, computePoRep and computeSnap.
		psPorep = append(psPorep, fmt.Sprintf("ps-porep-%d-%d-%d", mid, number, taskID))
		psSnap = append(psSnap, fmt.Sprintf("ps-snap-%d-%d-%d", mid, number, taskID))
	}
	ids["porep"], ids["snap"], ids["ps_porep"], ids["ps_snap"] = porep, snap, psPorep, psSnap
	if *window != "" {
		r := randomness(*window)
		// lib/ffi/cuzk_funcs.go, WindowPoStCuzk: partitionIdx is an int.
		ids["wdpost"] = fmt.Sprintf("wdpost-%d-%d-%d", mid, *partition, r[:8])
	}
	if *winning != "" {
		r := randomness(*winning)
		// lib/ffi/cuzk_funcs.go, WinningPoStCuzk.
		ids["winpost"] = fmt.Sprintf("winpost-%d-%x", mid, r[:8])
	}
	for _, spec := range strings.Split(*wrap, ",") {
		if spec == "" {
			continue
		}
		parts := strings.Split(spec, ":")
		if len(parts) != 4 {
			fail("-wrap %q: want c1-path:sector:sector-size:out-path", spec)
		}
		c1, err := os.ReadFile(parts[0])
		if err != nil {
			fail("%v", err)
		}
		sector, err1 := strconv.ParseUint(parts[1], 10, 64)
		size, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			fail("-wrap %q: sector and size are numbers", spec)
		}
		// wrapC1Output: int64(sectorNumber), the C1 bytes, uint64(sectorSize).
		wrapped, err := json.Marshal(c1OutputWrapper{
			SectorNum:  int64(sector),
			Phase1Out:  c1,
			SectorSize: size,
		})
		if err != nil {
			fail("%v", err)
		}
		if err := os.WriteFile(parts[3], wrapped, 0o644); err != nil {
			fail("%v", err)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(ids); err != nil {
		fail("%v", err)
	}
}
