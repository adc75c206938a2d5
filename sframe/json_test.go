package sframe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func TestDumpJSON(t *testing.T) {
	s := lookupSection(t)
	tb, err := sframe.Open(lookupBytes(t), s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tb.DumpJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version   int      `json:"version"`
		FlagNames []string `json:"flag_names"`
		ABIName   string   `json:"abi_name"`
		FixedRA   int      `json:"cfa_fixed_ra_offset"`
		NumFDEs   int      `json:"num_fdes"`
		Functions []struct {
			Start  uint64 `json:"start"`
			PCType string `json:"pc_type"`
			Signal bool   `json:"signal"`
			FREs   []struct {
				Start       uint64  `json:"start"`
				Words       []int32 `json:"words"`
				CFA         string  `json:"cfa"`
				FP          string  `json:"fp"`
				RA          string  `json:"ra"`
				RAUndefined bool    `json:"ra_undefined"`
			} `json:"fres"`
		} `json:"functions"`
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Version != 3 || got.ABIName != "SFRAME_ABI_AMD64_ENDIAN_LITTLE" || got.FixedRA != -8 || got.NumFDEs != 2 ||
		!cmp.Equal(got.FlagNames, []string{"SFRAME_F_FDE_SORTED", "SFRAME_F_FDE_FUNC_START_PCREL"}) {
		t.Errorf("header: %+v", got)
	}
	if len(got.Functions) != 2 {
		t.Fatalf("%d functions", len(got.Functions))
	}
	f0, f1 := got.Functions[0], got.Functions[1]
	if f0.Start != 0x1000 || f0.PCType != "inc" || !f0.Signal || len(f0.FREs) != 4 {
		t.Errorf("function 0: %+v", f0)
	} else {
		r := f0.FREs[2]
		if r.Start != 0x1004 || r.CFA != "fp+16" || r.FP != "c-16" || r.RA != "f" || !cmp.Equal(r.Words, []int32{16, -16}) {
			t.Errorf("function 0 FRE 2: %+v", r)
		}
		if !f0.FREs[3].RAUndefined {
			t.Errorf("function 0 FRE 3 not RA undefined: %+v", f0.FREs[3])
		}
	}
	if f1.Start != 0x2000 || f1.PCType != "mask" || f1.FREs[1].Start != 11 {
		t.Errorf("function 1: %+v", f1)
	}
}
