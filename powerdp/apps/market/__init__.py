"""The zonal DC market cleared by sharing ADMM (docs/market.md)."""
