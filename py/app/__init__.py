"""The page's Python side: the view model (view.py), its HTML pre-render (render.py) and the Pyodide
worker entry (worker.py). Nothing here touches the DOM; assets/app.js applies the view to the page."""
