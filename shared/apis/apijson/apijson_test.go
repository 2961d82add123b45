package apijson_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/shared/apis/apijson"
)

type inner struct {
	N    int               `json:"n"`
	Tags map[string]string `json:"tags,omitempty"`
}

type meta struct {
	Name string `json:"name"`
}

type doc struct {
	meta  `json:",inline"`
	Items []inner                      `json:"items"`
	Size  *resource.Quantity           `json:"size,omitempty"`
	ByKey map[string]map[string]string `json:"byKey,omitempty"`
	Flag  bool                         `json:"flag"`
}

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []apijson.Stray
	}{
		{name: "should decode a document without strays", give: `{"name":"a","items":[{"n":1}],"size":"1Gi"}`},
		{name: "should report unknown fields with indexed paths", give: `{"name":"a","extra":1,"items":[{"n":1},{"n":2,"m":3}]}`,
			want: []apijson.Stray{{Path: "extra"}, {Path: "items[1].m"}}},
		{name: "should report duplicate keys", give: `{"name":"a","name":"b"}`, want: []apijson.Stray{{Path: "name", Duplicate: true}}},
		{name: "should match field names case-sensitively", give: `{"Name":"a"}`, want: []apijson.Stray{{Path: "Name"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			got, err := apijson.Unmarshal([]byte(tt.give), &d)
			if err != nil {
				t.Fatalf("Unmarshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Unmarshal() strays mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name     string
		give     string
		wantPath string
		wantMsg  string
	}{
		{name: "should locate a wrong type inside a list", give: `{"items":[{"n":1},{"n":"2"}]}`, wantPath: "items[1].n", wantMsg: "expected an integer, got string"},
		{name: "should locate a wrong type inside a map", give: `{"byKey":{"a":{"b":1}}}`, wantPath: "byKey[a][b]", wantMsg: "expected a string, got number"},
		{name: "should locate a bad quantity", give: `{"size":"big"}`, wantPath: "size", wantMsg: `expected a quantity such as "500m", "4" or "16Gi"`},
		{name: "should report a list given for an object", give: `{"items":[[]]}`, wantPath: "items[0]", wantMsg: "expected an object, got array"},
		{name: "should report a bool given as a string", give: `{"flag":"yes"}`, wantPath: "flag", wantMsg: "expected true or false, got string"},
		{name: "should locate a wrong type after strings holding brackets, quotes and escapes", give: "{ \"name\" : \"a}]\\\"[{\" ,\n \"items\" : [ {\"n\":1} ,\t{\"n\" : true } ] }", wantPath: "items[1].n", wantMsg: "expected an integer, got bool"},
		{name: "should locate a wrong type in the second map of maps", give: `{"items":[{"n":1},{"n":2}],"byKey":{"x":{"a":"1"},"y":{"z":2}}}`, wantPath: "byKey[y][z]", wantMsg: "expected a string, got number"},
		{name: "should locate the value at fault when a key appears twice", give: `{"items":[{"n":1}],"items":[{"n":1},{"n":{}}]}`, wantPath: "items[1].n", wantMsg: "expected an integer, got object"},
		{name: "should report a malformed document", give: `{"name":`, wantPath: "", wantMsg: "not valid JSON: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			_, err := apijson.Unmarshal([]byte(tt.give), &d)
			var fe *apijson.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Unmarshal() error = %v, want a *FieldError", err)
			}
			if fe.Path != tt.wantPath || fe.Err.Error() != tt.wantMsg {
				t.Errorf("Unmarshal() error = (%q, %q), want (%q, %q)", fe.Path, fe.Err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}
