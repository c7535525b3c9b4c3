"""Federated learning, the second application: learning problems solved with private ADMM (SPEC §9).

Sits beside opf/ and uses admm/ and privacy/; never grid/ or opf/.
"""
