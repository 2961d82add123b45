package v1

import (
	"encoding/json"
	"slices"

	"github.com/nodewright/nodewright/shared/apis/apijson"
)

// kubeletFields is the typed v1.14.1 spec.kubelet without its JSON methods.
type kubeletFields KubeletConfiguration

// UnmarshalJSON decodes the twelve v1.14.1 fields and keeps every other key
// in Extra. A typed field of the wrong type is an *apijson.FieldError whose
// path is relative to spec.kubelet.
func (k *KubeletConfiguration) UnmarshalJSON(b []byte) error {
	var plain kubeletFields
	strays, err := apijson.Unmarshal(b, &plain)
	if err != nil {
		return err
	}
	*k = KubeletConfiguration(plain)
	k.Extra = nil
	if len(strays) == 0 {
		return nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, s := range strays {
		if s.Duplicate {
			continue
		}
		if raw, ok := all[s.Path]; ok {
			if k.Extra == nil {
				k.Extra = map[string]json.RawMessage{}
			}
			k.Extra[s.Path] = raw
		}
	}
	return nil
}

// MarshalJSON writes the typed fields and the Extra keys, sorted by key.
func (k KubeletConfiguration) MarshalJSON() ([]byte, error) {
	typed, err := json.Marshal(kubeletFields(k))
	if err != nil || len(k.Extra) == 0 {
		return typed, err
	}
	merged := map[string]json.RawMessage{}
	if err := json.Unmarshal(typed, &merged); err != nil {
		return nil, err
	}
	for name, raw := range k.Extra {
		if _, typedKey := merged[name]; !typedKey {
			merged[name] = raw
		}
	}
	return json.Marshal(merged)
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[M ~map[K]V, K ~string, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
