"""`bertlab serve`: a local web page and JSON API to use any model and look inside it.

`settings` (what it is told), `models` (each directory loaded once, with what its head can do),
`inference` (each task on a batch of raw inputs, composed of library calls), `queue` (the
bounded worker pool that batches requests arriving together), `guards` (request body checks
and safe headers), `schemas` (the API's JSON), `api` (the FastAPI app), `server` (running it),
and `static/` (the page: plain HTML, CSS and JavaScript, no build step).
"""
