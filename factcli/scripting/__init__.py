"""The one owner of running user code: Python functions loaded from files or written inline, the
Node.js worker (js/worker.js) for JavaScript, output transforms, and the values passed both ways."""
