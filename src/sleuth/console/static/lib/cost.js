// Cost where it is known: the server prices a turn (`usage.cost_usd`) when the catalog has prices for
// its model; a step is priced the same way, from the same catalog entry (`GET /models` `pricing`).

export function pricingOf(catalog, modelId) {
  return (catalog?.models || []).find((m) => m.id === modelId)?.pricing || null;
}

// Three significant digits below a dollar (a turn often costs a fraction of a cent), cents above.
export function dollars(value) {
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toPrecision(3)}`;
}

export function costText(costUsd, modelId, catalog) {
  if (costUsd !== null && costUsd !== undefined) return dollars(costUsd);
  return pricingOf(catalog, modelId) ? "—" : "not known (no prices configured)";
}

export function stepCost(cost, pricing) {
  if (!pricing || !cost) return null;
  return (cost.tokens_in ?? 0) * pricing.input_per_token + (cost.tokens_out ?? 0) * pricing.output_per_token;
}
