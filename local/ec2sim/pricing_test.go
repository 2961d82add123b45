package ec2sim_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// pricingClient is the real aws-sdk-go-v2 Price List client pointed at the
// simulator, in us-east-1 (where the Price List API lives), no retries.
func pricingClient(e *env) *pricing.Client {
	return pricing.New(pricing.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:  &http.Client{Transport: ec2sim.LoopbackTransport(http.DefaultTransport.(*http.Transport).Clone())}, RetryMaxAttempts: 1})
}

func term(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// linuxOnDemand are the filters that select the price a Linux node pays.
func linuxOnDemand(region string) []pricingtypes.Filter {
	return []pricingtypes.Filter{term("regionCode", region), term("operatingSystem", "Linux"), term("tenancy", "Shared"),
		term("capacitystatus", "Used"), term("preInstalledSw", "NA"), term("marketoption", "OnDemand")}
}

// priceDoc is the part of one PriceList entry a price reader needs.
type priceDoc struct {
	Product struct {
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
		SKU           string            `json:"sku"`
	} `json:"product"`
	ServiceCode string `json:"serviceCode"`
	Terms       struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
			OfferTermCode string `json:"offerTermCode"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// onDemandPrices pages GetProducts and returns instance type → USD/hour.
func onDemandPrices(t *testing.T, c *pricing.Client, filters []pricingtypes.Filter, max int32) (map[string]float64, int, int) {
	t.Helper()
	prices := map[string]float64{}
	pages, docs := 0, 0
	p := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"), Filters: filters, MaxResults: aws.Int32(max)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("GetProducts page %d: %v", pages+1, err)
		}
		pages++
		if aws.ToString(page.FormatVersion) != "aws_v1" {
			t.Fatalf("FormatVersion = %q", aws.ToString(page.FormatVersion))
		}
		for _, raw := range page.PriceList {
			docs++
			var d priceDoc
			if err := json.Unmarshal([]byte(raw), &d); err != nil {
				t.Fatalf("PriceList entry is not JSON: %v: %s", err, raw)
			}
			if d.ServiceCode != "AmazonEC2" || d.Product.SKU == "" || len(d.Terms.OnDemand) != 1 {
				t.Fatalf("entry shape: %s", raw)
			}
			for _, term := range d.Terms.OnDemand {
				for _, dim := range term.PriceDimensions {
					v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
					if err != nil || dim.Unit != "Hrs" || term.OfferTermCode != "JRTCKXETXF" {
						t.Fatalf("price dimension %+v (%v)", dim, err)
					}
					prices[d.Product.Attributes["instanceType"]] = v
				}
			}
		}
	}
	return prices, pages, docs
}

func TestGetProductsServesTheSimulatorsOnDemandPricesThroughTheSDK(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	c := pricingClient(e)
	prices, pages, docs := onDemandPrices(t, c, linuxOnDemand("ap-northeast-1"), 100)
	if pages < 2 || len(prices) != docs {
		t.Errorf("%d pages, %d documents for %d types; want several pages and one Linux product per type", pages, docs, len(prices))
	}
	z := e.sim.Zones()[0]
	for _, typ := range []string{"m5.large", "c6g.xlarge", "r5.metal"} {
		want, ok := e.sim.Price(typ, z, "on-demand")
		if !ok || prices[typ] != want {
			t.Errorf("%s: GetProducts %v, simulator charges %v (%v)", typ, prices[typ], want, ok)
		}
	}
	// Without the filters the look-alike products (Windows, dedicated,
	// unused reservations) come too, at other prices.
	_, _, allDocs := onDemandPrices(t, c, []pricingtypes.Filter{term("regionCode", "ap-northeast-1"), term("instanceType", "m5.large")}, 100)
	if allDocs != 4 {
		t.Errorf("m5.large without OS/tenancy filters: %d products, want 4", allDocs)
	}
	// Another region's products are not in this simulator's list.
	other, _, n := onDemandPrices(t, c, linuxOnDemand("us-east-1"), 100)
	if n != 0 {
		t.Errorf("us-east-1 products from an ap-northeast-1 simulator: %d (%v)", n, other)
	}
}

func TestGetProductsRejectsBadInputAndCanBeThrottled(t *testing.T) {
	e := newEnv(t, ec2sim.Options{Region: "ap-northeast-1"})
	c := pricingClient(e)
	for name, in := range map[string]*pricing.GetProductsInput{
		"maxResults":    {ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)},
		"FormatVersion": {ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v2")},
		"filters.1":     {ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{{Type: "FUZZY", Field: aws.String("a"), Value: aws.String("b")}}},
		"ServiceCode":   {ServiceCode: aws.String("AmazonS3")},
		"pagination":    {ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("garbage!")},
	} {
		_, err := c.GetProducts(t.Context(), in)
		code, status := apiCode(err)
		if err == nil || status != http.StatusBadRequest || code == "" {
			t.Errorf("%s: error %v (code %q, status %d), want a 400 API error", name, err, code, status)
		}
	}
	e.sim.Throttle("GetProducts", 1)
	_, err := c.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(1)})
	if code, _ := apiCode(err); code != "ThrottlingException" {
		t.Errorf("throttled GetProducts: code %q (%v), want ThrottlingException", code, err)
	}
	if calls := e.sim.CallsTo("GetProducts"); len(calls) != 6 || calls[0].Service != "pricing" {
		t.Errorf("recorded %d GetProducts calls, want 6 of service pricing", len(calls))
	}
}
