"""The site: asv's pages with fwdasv's findings, their list, their pages and feed."""
