NOTES = ""
