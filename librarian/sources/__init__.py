"""Where wheels come from besides a store: pages of links (a find-links page, a PEP 503 project page, a
release page) read as pip reads ``--find-links`` (:mod:`links`, pure), and files fetched over HTTP with
time-outs, a size bound and the page's hash checked (:mod:`http`). Nothing here knows stores or wheels'
insides: ``ops`` turns what is fetched into wheels to publish.
"""
